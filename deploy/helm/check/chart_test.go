// Package check renders deploy/helm/windowd with Helm's own Go packages
// (pinned in this module, so that windowd's module never depends on
// Kubernetes libraries), lints it strictly, decodes every rendered object
// strictly into the Kubernetes API types and checks what the chart
// promises (docs/OPERATIONS.md, Kubernetes).
package check

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v4/pkg/action"
	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/common/util"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/engine"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/yaml"

	"github.com/windowd/windowd/config"
)

const chartDir = "../windowd"

// scenarios are the values files CI renders: the defaults, SASL and
// registry passwords from Secrets, standbys with a ServiceMonitor.
var scenarios = []string{"default", "secrets", "standbys"}

func values(t *testing.T, name string) map[string]any {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	vals := map[string]any{}
	if err := yaml.Unmarshal(data, &vals); err != nil {
		t.Fatalf("%s.yaml: %v", name, err)
	}
	return vals
}

func loadChart(t *testing.T) *chart.Chart {
	t.Helper()
	c, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// render renders the chart as `helm install wd --namespace streams` would.
func render(t *testing.T, vals map[string]any) (map[string]string, error) {
	t.Helper()
	c := loadChart(t)
	rv, err := util.ToRenderValues(c, vals, common.ReleaseOptions{Name: "wd", Namespace: "streams", IsInstall: true, Revision: 1}, common.DefaultCapabilities)
	if err != nil {
		return nil, err
	}
	return engine.Render(c, rv)
}

// objects is a rendering decoded strictly, by kind and name.
type objects struct {
	sts        []*appsv1.StatefulSet
	services   map[string]*corev1.Service
	configMaps map[string]*corev1.ConfigMap
	pdbs       []*policyv1.PodDisruptionBudget
	monitors   []*serviceMonitor
}

// serviceMonitor is the part of the Prometheus Operator's ServiceMonitor
// the chart writes (a CRD: not in k8s.io/api).
type serviceMonitor struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name   string            `json:"name"`
		Labels map[string]string `json:"labels"`
	} `json:"metadata"`
	Spec struct {
		Selector struct {
			MatchLabels map[string]string `json:"matchLabels"`
		} `json:"selector"`
		Endpoints []struct {
			Port     string `json:"port"`
			Path     string `json:"path"`
			Interval string `json:"interval"`
		} `json:"endpoints"`
	} `json:"spec"`
}

// strict decodes a YAML document into v, refusing unknown fields.
func strict(doc []byte, v any) error {
	js, err := yaml.YAMLToJSON(doc)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

var docSep = regexp.MustCompile(`(?m)^---\s*$`)

func decode(t *testing.T, files map[string]string) objects {
	t.Helper()
	o := objects{services: map[string]*corev1.Service{}, configMaps: map[string]*corev1.ConfigMap{}}
	for file, text := range files {
		if !strings.HasSuffix(file, ".yaml") {
			continue
		}
		for _, doc := range docSep.Split(text, -1) {
			if strings.TrimSpace(doc) == "" {
				continue
			}
			var head struct{ Kind string }
			if err := yaml.Unmarshal([]byte(doc), &head); err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			var err error
			switch head.Kind {
			case "StatefulSet":
				s := &appsv1.StatefulSet{}
				err = strict([]byte(doc), s)
				o.sts = append(o.sts, s)
			case "Service":
				s := &corev1.Service{}
				err = strict([]byte(doc), s)
				o.services[s.Name] = s
			case "ConfigMap":
				c := &corev1.ConfigMap{}
				err = strict([]byte(doc), c)
				o.configMaps[c.Name] = c
			case "PodDisruptionBudget":
				p := &policyv1.PodDisruptionBudget{}
				err = strict([]byte(doc), p)
				o.pdbs = append(o.pdbs, p)
			case "ServiceMonitor":
				m := &serviceMonitor{}
				err = strict([]byte(doc), m)
				o.monitors = append(o.monitors, m)
			default:
				t.Fatalf("%s: an object of kind %q the check does not know", file, head.Kind)
			}
			if err != nil {
				t.Fatalf("%s: %s does not decode strictly: %v\n%s", file, head.Kind, err, doc)
			}
		}
	}
	return o
}

func TestLintStrict(t *testing.T) {
	for _, name := range scenarios {
		t.Run(name, func(t *testing.T) {
			l := action.NewLint()
			l.Strict = true
			l.Namespace = "streams"
			res := l.Run([]string{chartDir}, values(t, name))
			for _, m := range res.Messages {
				t.Logf("lint: %s", m.Error())
			}
			if len(res.Errors) > 0 || action.HasWarningsOrErrors(res) {
				t.Fatalf("helm lint --strict: %v", res.Errors)
			}
		})
	}
}

func TestRenderedObjects(t *testing.T) {
	for _, name := range scenarios {
		t.Run(name, func(t *testing.T) {
			vals := values(t, name)
			files, err := render(t, vals)
			if err != nil {
				t.Fatal(err)
			}
			o := decode(t, files)
			checkObjects(t, o, vals)
		})
	}
}

func checkObjects(t *testing.T, o objects, vals map[string]any) {
	if len(o.sts) != 1 {
		t.Fatalf("%d StatefulSets, want 1", len(o.sts))
	}
	sts := o.sts[0]
	spec := sts.Spec
	pod := spec.Template.Spec
	if spec.PodManagementPolicy != appsv1.ParallelPodManagement {
		t.Errorf("podManagementPolicy %q, want Parallel", spec.PodManagementPolicy)
	}
	if spec.UpdateStrategy.Type != appsv1.RollingUpdateStatefulSetStrategyType {
		t.Errorf("updateStrategy %q, want RollingUpdate", spec.UpdateStrategy.Type)
	}
	if r, ok := vals["replicas"]; ok && spec.Replicas != nil && fmt.Sprint(*spec.Replicas) != fmt.Sprint(r) {
		t.Errorf("replicas %d, values say %v", *spec.Replicas, r)
	}

	// The config: windowd's own parser takes it, with the secrets' files.
	cm := o.configMaps[sts.Name]
	if cm == nil {
		t.Fatalf("no ConfigMap %s", sts.Name)
	}
	raw := cm.Data["config.yaml"]
	if strings.Contains(raw, "password:") {
		t.Errorf("a password is in the ConfigMap:\n%s", raw)
	}
	cfg := parseConfig(t, raw, pod)

	if len(pod.Containers) != 1 {
		t.Fatalf("%d containers, want windowd alone", len(pod.Containers))
	}
	c := pod.Containers[0]
	if c.Args[0] != "run" || !strings.Contains(strings.Join(c.Args, " "), "--config /etc/windowd/config.yaml") {
		t.Errorf("windowd args %q", c.Args)
	}

	// Kubernetes waits longer than windowd's own grace before it kills.
	grace := time.Duration(cfg.ShutdownGrace) * time.Millisecond
	if g := pod.TerminationGracePeriodSeconds; g == nil || time.Duration(*g)*time.Second <= grace {
		t.Errorf("terminationGracePeriodSeconds %s, want more than shutdown_grace %s", ptrString(g), grace)
	}

	// Probes: liveness /healthz, readiness /readyz, on the port windowd listens on.
	port := c.Ports[0].ContainerPort
	if c.Ports[0].Name != "http" || !strings.HasSuffix(cfg.HTTP.Listen, ":"+strconv.Itoa(int(port))) || strings.HasPrefix(cfg.HTTP.Listen, "127.") {
		t.Errorf("container port %s/%d, windowd listens on %s", c.Ports[0].Name, port, cfg.HTTP.Listen)
	}
	for _, p := range []struct {
		what  string
		probe *corev1.Probe
		path  string
	}{{"liveness", c.LivenessProbe, "/healthz"}, {"readiness", c.ReadinessProbe, "/readyz"}} {
		if p.probe == nil || p.probe.HTTPGet == nil || p.probe.HTTPGet.Path != p.path || p.probe.HTTPGet.Port.String() != "http" {
			t.Errorf("%s probe %+v, want GET %s on port http", p.what, p.probe, p.path)
		}
	}

	// state.dir is the claim of the volumeClaimTemplate, in both containers.
	if len(spec.VolumeClaimTemplates) != 1 {
		t.Fatalf("%d volumeClaimTemplates, want 1", len(spec.VolumeClaimTemplates))
	}
	claim := spec.VolumeClaimTemplates[0]
	if q := claim.Spec.Resources.Requests[corev1.ResourceStorage]; q.IsZero() {
		t.Errorf("the state claim requests no storage")
	}
	for _, ct := range append([]corev1.Container{c}, pod.InitContainers...) {
		if !mounted(ct, claim.Name, cfg.State.Dir) {
			t.Errorf("container %s does not mount claim %s at state.dir %s: %+v", ct.Name, claim.Name, cfg.State.Dir, ct.VolumeMounts)
		}
	}
	for _, v := range pod.Volumes {
		if v.Name == claim.Name {
			t.Errorf("volume %s shadows the claim", v.Name)
		}
	}

	// The plan runs before windowd: the new config against the pod's state.
	if len(pod.InitContainers) != 1 || strings.Join(pod.InitContainers[0].Args, " ") != "validate --config /etc/windowd/config.yaml --against-state "+cfg.State.Dir {
		t.Errorf("init containers %+v, want windowd validate --against-state %s", pod.InitContainers, cfg.State.Dir)
	} else if pod.InitContainers[0].Image != c.Image {
		t.Errorf("the plan runs image %s, windowd %s", pod.InitContainers[0].Image, c.Image)
	}

	// GOMEMLIMIT below the memory limit, with Pebble's C memory left over.
	limit := c.Resources.Limits[corev1.ResourceMemory]
	gomem := envValue(c, "GOMEMLIMIT")
	mib, err := strconv.ParseInt(strings.TrimSuffix(gomem, "MiB"), 10, 64)
	if err != nil || !strings.HasSuffix(gomem, "MiB") {
		t.Fatalf("GOMEMLIMIT %q, want N MiB", gomem)
	}
	pebble := int64(64<<20) * int64(len(cfg.Pipelines))
	if limit.IsZero() || mib<<20+pebble >= limit.Value() {
		t.Errorf("GOMEMLIMIT %s + Pebble's %d MiB is not below the memory limit %s", gomem, pebble>>20, limit.String())
	}
	if need := 2*int64(cfg.State.CacheBytes)*int64(len(cfg.Pipelines)) + 192<<20; mib<<20 < need {
		t.Logf("note: GOMEMLIMIT %s is below windowd's default for this config (%d MiB)", gomem, need>>20)
	}

	// A static binary's security context.
	if sc := pod.SecurityContext; sc == nil || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.RunAsUser == nil || *sc.RunAsUser == 0 {
		t.Errorf("pod security context %+v, want runAsNonRoot with a non-zero user", sc)
	}
	for _, ct := range append([]corev1.Container{c}, pod.InitContainers...) {
		sc := ct.SecurityContext
		if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
			t.Errorf("container %s security context %+v, want a read-only root and no privilege escalation", ct.Name, sc)
		}
	}

	// Services: the governing headless one, and metrics with scrape annotations.
	head := o.services[spec.ServiceName]
	if head == nil || head.Spec.ClusterIP != corev1.ClusterIPNone {
		t.Errorf("serviceName %s is not a headless Service: %+v", spec.ServiceName, head)
	}
	metrics := o.services[sts.Name+"-metrics"]
	if metrics == nil || metrics.Annotations["prometheus.io/scrape"] != "true" || metrics.Annotations["prometheus.io/port"] != strconv.Itoa(int(port)) {
		t.Errorf("metrics Service %+v, want prometheus.io annotations on port %d", metrics, port)
	}
	if spec.Template.Annotations["prometheus.io/scrape"] != "true" || spec.Template.Annotations["checksum/config"] == "" {
		t.Errorf("pod annotations %v, want prometheus.io/scrape and checksum/config", spec.Template.Annotations)
	}
	for _, s := range o.services {
		if !selects(s.Spec.Selector, spec.Template.Labels) {
			t.Errorf("Service %s selects %v, not the pods %v", s.Name, s.Spec.Selector, spec.Template.Labels)
		}
	}

	// PodDisruptionBudget over the pods.
	if len(o.pdbs) != 1 || !selects(o.pdbs[0].Spec.Selector.MatchLabels, spec.Template.Labels) || o.pdbs[0].Spec.MaxUnavailable == nil {
		t.Errorf("PodDisruptionBudgets %+v, want one with maxUnavailable over the pods", o.pdbs)
	}

	// The ServiceMonitor, when enabled, scrapes the metrics Service.
	wantMonitor := false
	if m, ok := vals["metrics"].(map[string]any); ok {
		if sm, ok := m["serviceMonitor"].(map[string]any); ok {
			wantMonitor, _ = sm["enabled"].(bool)
		}
	}
	switch {
	case wantMonitor && len(o.monitors) != 1:
		t.Errorf("%d ServiceMonitors, want 1", len(o.monitors))
	case !wantMonitor && len(o.monitors) != 0:
		t.Errorf("a ServiceMonitor although none is enabled")
	case wantMonitor:
		m := o.monitors[0]
		if m.APIVersion != "monitoring.coreos.com/v1" || !selects(m.Spec.Selector.MatchLabels, metrics.Labels) || m.Spec.Endpoints[0].Path != "/metrics" || m.Spec.Endpoints[0].Port != "http" {
			t.Errorf("ServiceMonitor %+v does not scrape the metrics Service", m)
		}
	}

	// The dashboard, valid JSON.
	if d := o.configMaps[sts.Name+"-dashboard"]; d == nil || !json.Valid([]byte(d.Data["windowd.json"])) {
		t.Errorf("no dashboard ConfigMap with valid JSON")
	}
}

// parseConfig loads the rendered windowd config with windowd's parser; the
// password files it names are mounted from Secrets in the pod, and are
// written to a temporary directory for the parse.
func parseConfig(t *testing.T, raw string, pod corev1.PodSpec) *config.Config {
	t.Helper()
	dir := t.TempDir()
	secretMounts := map[string]string{}
	for _, m := range pod.Containers[0].VolumeMounts {
		for _, v := range pod.Volumes {
			if v.Name == m.Name && v.Secret != nil {
				if m.SubPath == "" {
					t.Errorf("secret volume %s mounted without subPath", v.Name)
				}
				secretMounts[m.MountPath] = v.Secret.SecretName
			}
		}
	}
	for _, path := range regexp.MustCompile(`password_file: (\S+)`).FindAllStringSubmatch(raw, -1) {
		if _, ok := secretMounts[path[1]]; !ok {
			t.Errorf("password_file %s is not a mounted Secret (mounts: %v)", path[1], secretMounts)
		}
		local := filepath.Join(dir, filepath.Base(path[1]))
		if err := os.WriteFile(local, []byte("s3cret\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		raw = strings.ReplaceAll(raw, path[1], local)
	}
	cfg, err := config.Parse("config.yaml", []byte(raw))
	if err != nil {
		t.Fatalf("the rendered config does not load:\n%v\n%s", err, raw)
	}
	return cfg
}

func ptrString(p *int64) string {
	if p == nil {
		return "unset"
	}
	return strconv.FormatInt(*p, 10)
}

func mounted(c corev1.Container, volume, path string) bool {
	for _, m := range c.VolumeMounts {
		if m.Name == volume && filepath.Clean(m.MountPath) == filepath.Clean(path) {
			return true
		}
	}
	return false
}

func envValue(c corev1.Container, name string) string {
	for _, e := range c.Env {
		if e.Name == name {
			return e.Value
		}
	}
	return ""
}

func selects(selector, labels map[string]string) bool {
	if len(selector) == 0 {
		return false
	}
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// A memory limit that leaves the Go heap too little is refused at render
// time, saying why; so is one not written in Mi or Gi.
func TestMemoryLimitRefused(t *testing.T) {
	for limit, want := range map[string]string{"160Mi": "raise it", "1G": "write it in Mi or Gi"} {
		vals := values(t, "default")
		vals["resources"] = map[string]any{"limits": map[string]any{"memory": limit}}
		if _, err := render(t, vals); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("memory limit %s: %v, want an error saying %q", limit, err, want)
		}
	}
	if q := resource.MustParse("1536Mi"); q.Value() != 1536<<20 {
		t.Fatal("resource quantities are not what the check assumes")
	}
}
