package main

// Checks of the deployment files (Dockerfile, .dockerignore,
// docker-compose.yml, deploy/, configs/docker-compose.yaml) by parsing them:
// no Docker engine and no network are needed. They catch wiring that would
// only break at `docker compose up`: a renamed service, a config that does not
// load, a port that does not match, a dashboard querying a renamed metric.

import (
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"

	"github.com/windowd/windowd/config"
)

// repoRoot is the repository root, relative to this package's directory.
const repoRoot = "../.."

// knownMetrics are the metric names the service exports (docs/SEMANTICS.md,
// Operation) that the dashboard may query. A dashboard expression naming any
// other windowd_ metric fails TestComposeDashboardMetrics, and so does a
// known metric that no panel shows.
var knownMetrics = []string{
	"windowd_partition_watermark_ms",
	"windowd_frontier_ms",
	"windowd_frontier_lag_seconds",
	"windowd_panes_total",
	"windowd_late_dropped_total",
	"windowd_dead_letters_total",
	"windowd_records_in_total",
	"windowd_state_bytes",
	"windowd_partition_idle",
	"windowd_open_windows",
	"windowd_commit_latency_seconds", // histogram
	"windowd_partition_lag_records",
	"windowd_cache_bytes",
	"windowd_cache_evictions_total",
}

var histogramMetrics = []string{"windowd_commit_latency_seconds"}

// composeFile is the part of the Compose specification the tests read. The
// fields that have a short and a long syntax are kept as raw values.
type composeFile struct {
	Services map[string]composeService `yaml:"services"`
	Volumes  map[string]any            `yaml:"volumes"`
}

type composeService struct {
	Image       string         `yaml:"image"`
	Build       any            `yaml:"build"`
	DependsOn   any            `yaml:"depends_on"`
	Environment any            `yaml:"environment"`
	Volumes     []any          `yaml:"volumes"`
	Ports       []any          `yaml:"ports"`
	Command     any            `yaml:"command"`
	Healthcheck map[string]any `yaml:"healthcheck"`
}

// mount is one entry of a service's volumes.
type mount struct {
	source, target string
	bind           bool // source is a host path (else a named volume)
}

func loadCompose(t *testing.T) composeFile {
	t.Helper()
	return loadComposeFile(t, "docker-compose.yml")
}

func loadComposeFile(t *testing.T, name string) composeFile {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, name))
	if err != nil {
		t.Fatal(err)
	}
	var c composeFile
	if err := yaml.Unmarshal(data, &c); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return c
}

func composeSvc(t *testing.T, c composeFile, name string) composeService {
	t.Helper()
	s, ok := c.Services[name]
	if !ok {
		t.Fatalf("docker-compose.yml: no service %q", name)
	}
	return s
}

// mounts reads short ("src:dst[:mode]") and long ({type, source, target})
// volume entries.
func mounts(t *testing.T, name string, s composeService) []mount {
	t.Helper()
	var ms []mount
	for _, v := range s.Volumes {
		var m mount
		switch v := v.(type) {
		case string:
			parts := strings.Split(v, ":")
			if len(parts) < 2 {
				t.Fatalf("service %s: volume %q has no target", name, v)
			}
			m = mount{source: parts[0], target: parts[1]}
			m.bind = strings.HasPrefix(m.source, ".") || strings.HasPrefix(m.source, "/") || strings.HasPrefix(m.source, "~")
		case map[string]any:
			m = mount{source: fmt.Sprint(v["source"]), target: fmt.Sprint(v["target"]), bind: v["type"] == "bind"}
		default:
			t.Fatalf("service %s: volume entry %v is neither a string nor a mapping", name, v)
		}
		ms = append(ms, m)
	}
	return ms
}

// mountAt returns the mount whose target is target.
func mountAt(t *testing.T, name string, s composeService, target string) mount {
	t.Helper()
	for _, m := range mounts(t, name, s) {
		if path.Clean(m.target) == path.Clean(target) {
			return m
		}
	}
	t.Fatalf("service %s mounts nothing at %s", name, target)
	return mount{}
}

// hostPath is the repository path of a bind mount's source.
func hostPath(t *testing.T, name string, m mount) string {
	t.Helper()
	if !m.bind {
		t.Fatalf("service %s: %s is a named volume, want a file of the repository", name, m.target)
	}
	if filepath.IsAbs(m.source) || strings.HasPrefix(m.source, "~") {
		t.Fatalf("service %s: mount source %q must be relative to the repository", name, m.source)
	}
	return filepath.Join(repoRoot, filepath.FromSlash(m.source))
}

// resolveMounted maps a path inside the container to the repository path of
// the bind mount holding it.
func resolveMounted(t *testing.T, name string, s composeService, p string) string {
	t.Helper()
	p = path.Clean(p)
	for _, m := range mounts(t, name, s) {
		target := path.Clean(m.target)
		if m.bind && (p == target || strings.HasPrefix(p, target+"/")) {
			return filepath.Join(hostPath(t, name, m), filepath.FromSlash(strings.TrimPrefix(p, target)))
		}
	}
	t.Fatalf("service %s: %s is not inside a bind mount", name, p)
	return ""
}

// containerPorts are the container ports a service publishes.
func containerPorts(t *testing.T, name string, s composeService) []string {
	t.Helper()
	var ports []string
	for _, p := range s.Ports {
		switch p := p.(type) {
		case string:
			p, _, _ = strings.Cut(p, "/") // "9100:9100/tcp"
			parts := strings.Split(p, ":")
			ports = append(ports, parts[len(parts)-1])
		case uint64, int64, int:
			ports = append(ports, fmt.Sprint(p))
		case map[string]any:
			ports = append(ports, fmt.Sprint(p["target"]))
		default:
			t.Fatalf("service %s: port entry %v is not understood", name, p)
		}
	}
	return ports
}

// environment reads the mapping and the list ("K=V") forms.
func environment(t *testing.T, name string, s composeService) map[string]string {
	t.Helper()
	env := map[string]string{}
	switch e := s.Environment.(type) {
	case nil:
	case map[string]any:
		for k, v := range e {
			env[k] = fmt.Sprint(v)
		}
	case []any:
		for _, kv := range e {
			k, v, _ := strings.Cut(fmt.Sprint(kv), "=")
			env[k] = v
		}
	default:
		t.Fatalf("service %s: environment %v is not understood", name, e)
	}
	return env
}

// dependsOn returns the condition of each dependency (the list form means
// service_started).
func dependsOn(t *testing.T, name string, s composeService) map[string]string {
	t.Helper()
	deps := map[string]string{}
	switch d := s.DependsOn.(type) {
	case nil:
	case []any:
		for _, n := range d {
			deps[fmt.Sprint(n)] = "service_started"
		}
	case map[string]any:
		for n, v := range d {
			cond := "service_started"
			if m, ok := v.(map[string]any); ok && m["condition"] != nil {
				cond = fmt.Sprint(m["condition"])
			}
			deps[n] = cond
		}
	default:
		t.Fatalf("service %s: depends_on %v is not understood", name, d)
	}
	return deps
}

func splitHostPort(t *testing.T, what, addr string) (string, string) {
	t.Helper()
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return host, port
}

// windowdConfig loads the configuration compose mounts into windowd.
func windowdConfig(t *testing.T, c composeFile) (*config.Config, string) {
	t.Helper()
	w := composeSvc(t, c, "windowd")
	target := configPath(t, w)
	file := hostPath(t, "windowd", mountAt(t, "windowd", w, target))
	cfg, err := config.Load(file)
	if err != nil {
		t.Fatalf("windowd config %s (mounted at %s) does not load:\n%v", file, target, err)
	}
	return cfg, file
}

// configPath is the --config argument windowd runs with: compose's command,
// or the Dockerfile's CMD.
func configPath(t *testing.T, w composeService) string {
	t.Helper()
	var args []string
	switch cmd := w.Command.(type) {
	case nil:
		args = dockerfile(t).finalJSON(t, "CMD")
	case []any:
		for _, a := range cmd {
			args = append(args, fmt.Sprint(a))
		}
	case string:
		args = strings.Fields(cmd)
	}
	for i, a := range args {
		if a == "--config" && i+1 < len(args) {
			return args[i+1]
		}
		if v, ok := strings.CutPrefix(a, "--config="); ok {
			return v
		}
	}
	t.Fatalf("windowd command %q has no --config", args)
	return ""
}

func TestComposeServices(t *testing.T) {
	c := loadCompose(t)
	for _, name := range []string{"kafka", "windowd", "prometheus", "grafana"} {
		s := composeSvc(t, c, name)
		if s.Image == "" && s.Build == nil {
			t.Errorf("service %s has neither image nor build", name)
		}
		// Every named volume a service uses is declared at the top level.
		for _, m := range mounts(t, name, s) {
			if _, ok := c.Volumes[m.source]; !m.bind && !ok {
				t.Errorf("service %s uses volume %q, not declared under volumes:", name, m.source)
			}
		}
	}
	if img := composeSvc(t, c, "kafka").Image; !strings.HasPrefix(img, "apache/kafka:4.") {
		t.Errorf("kafka image %q, want apache/kafka:4.x (KRaft)", img)
	}
}

func TestComposeWindowdBuild(t *testing.T) {
	w := composeSvc(t, loadCompose(t), "windowd")
	context, dockerfileName := "", "Dockerfile"
	switch b := w.Build.(type) {
	case string:
		context = b
	case map[string]any:
		context = fmt.Sprint(b["context"])
		if d, ok := b["dockerfile"]; ok {
			dockerfileName = fmt.Sprint(d)
		}
	default:
		t.Fatalf("windowd build %v: want a context", w.Build)
	}
	if path.Clean(context) != "." {
		t.Errorf("windowd build context %q, want the repository root \".\"", context)
	}
	if filepath.Clean(filepath.Join(context, dockerfileName)) != "Dockerfile" {
		t.Errorf("windowd builds with %s/%s, want the repository's Dockerfile", context, dockerfileName)
	}
	if _, err := os.Stat(filepath.Join(repoRoot, "Dockerfile")); err != nil {
		t.Error(err)
	}
}

func TestComposeWindowdDependsOnHealthyKafka(t *testing.T) {
	c := loadCompose(t)
	if cond := dependsOn(t, "windowd", composeSvc(t, c, "windowd"))["kafka"]; cond != "service_healthy" {
		t.Errorf("windowd depends on kafka with condition %q, want service_healthy", cond)
	}
	hc := composeSvc(t, c, "kafka").Healthcheck
	if !strings.Contains(fmt.Sprint(hc["test"]), "kafka-broker-api-versions.sh") {
		t.Errorf("kafka healthcheck %v, want a kafka-broker-api-versions.sh probe", hc["test"])
	}
}

func TestComposeWindowdConfig(t *testing.T) {
	c := loadCompose(t)
	cfg, file := windowdConfig(t, c)
	if cfg.Kafka.Embedded || len(cfg.Kafka.Brokers) == 0 {
		t.Fatalf("%s: brokers must list the kafka service, not the embedded broker", file)
	}

	// Every broker is an advertised listener of the kafka service, on a port
	// it listens on.
	env := environment(t, "kafka", composeSvc(t, c, "kafka"))
	advertised := map[string]bool{}
	for _, l := range strings.Split(env["KAFKA_ADVERTISED_LISTENERS"], ",") {
		if _, addr, ok := strings.Cut(strings.TrimSpace(l), "://"); ok {
			advertised[addr] = true
		}
	}
	var listenPorts []string
	for _, l := range strings.Split(env["KAFKA_LISTENERS"], ",") {
		if _, addr, ok := strings.Cut(strings.TrimSpace(l), "://"); ok {
			_, port := splitHostPort(t, "KAFKA_LISTENERS", addr)
			listenPorts = append(listenPorts, port)
		}
	}
	for _, b := range cfg.Kafka.Brokers {
		host, port := splitHostPort(t, "broker", b)
		if host != "kafka" {
			t.Errorf("%s: broker %s, want the kafka service name as host", file, b)
		}
		if !advertised[b] {
			t.Errorf("%s: broker %s is not among kafka's KAFKA_ADVERTISED_LISTENERS %q", file, b, env["KAFKA_ADVERTISED_LISTENERS"])
		}
		if !slices.Contains(listenPorts, port) {
			t.Errorf("%s: broker port %s is not among kafka's KAFKA_LISTENERS %q", file, port, env["KAFKA_LISTENERS"])
		}
	}
	if env["KAFKA_CONTROLLER_QUORUM_VOTERS"] == "" || !strings.Contains(env["KAFKA_PROCESS_ROLES"], "controller") {
		t.Errorf("kafka is not a KRaft controller: PROCESS_ROLES %q, QUORUM_VOTERS %q", env["KAFKA_PROCESS_ROLES"], env["KAFKA_CONTROLLER_QUORUM_VOTERS"])
	}

	// State lives on a named volume, which the image declares.
	w := composeSvc(t, c, "windowd")
	if m := mountAt(t, "windowd", w, cfg.State.Dir); m.bind {
		t.Errorf("state.dir %s is a bind mount, want a named volume", cfg.State.Dir)
	}
	if vols := dockerfile(t).finalJSON(t, "VOLUME"); !slices.Contains(vols, cfg.State.Dir) {
		t.Errorf("Dockerfile VOLUME %q does not hold state.dir %s", vols, cfg.State.Dir)
	}
}

// The Avro pipeline's registry is the compose stack's schema-registry
// service, on the port it listens on inside the network, started before
// windowd; kafka-init creates every pipeline's input topic.
func TestComposeSchemaRegistry(t *testing.T) {
	c := loadCompose(t)
	cfg, file := windowdConfig(t, c)
	if cfg.SchemaRegistry == nil {
		t.Fatalf("%s: no schema_registry", file)
	}
	u, err := url.Parse(cfg.SchemaRegistry.URL)
	if err != nil {
		t.Fatal(err)
	}
	if u.Hostname() != "schema-registry" || u.Port() != "8080" {
		t.Errorf("%s: schema_registry.url %s, want the schema-registry service's port 8080", file, cfg.SchemaRegistry.URL)
	}
	sr := composeSvc(t, c, "schema-registry")
	if !strings.HasPrefix(sr.Image, "apicurio/apicurio-registry:3.") || !slices.ContainsFunc(sr.Ports, func(p any) bool { return strings.HasSuffix(fmt.Sprint(p), ":8080") }) {
		t.Errorf("schema-registry: image %q, ports %v; want Apicurio Registry 3.x publishing 8080", sr.Image, sr.Ports)
	}
	if _, ok := dependsOn(t, "windowd", composeSvc(t, c, "windowd"))["schema-registry"]; !ok {
		t.Error("windowd does not depend on schema-registry")
	}
	binary := false
	init := fmt.Sprint(composeSvc(t, c, "kafka-init").Command)
	for _, p := range cfg.Pipelines {
		binary = binary || p.Input.Format != config.JSON
		if !strings.Contains(init, p.Input.Topic) {
			t.Errorf("kafka-init does not create the input topic %q of pipeline %s", p.Input.Topic, p.Name)
		}
	}
	if !binary {
		t.Errorf("%s: no pipeline reads avro or protobuf", file)
	}
}

func TestComposeMetricsPort(t *testing.T) {
	c := loadCompose(t)
	cfg, file := windowdConfig(t, c)
	host, port := splitHostPort(t, "http.listen", cfg.HTTP.Listen)
	if ip := net.ParseIP(host); host == "localhost" || ip != nil && ip.IsLoopback() {
		t.Errorf("%s: http.listen %s is unreachable from other containers; listen on 0.0.0.0", file, cfg.HTTP.Listen)
	}
	if ports := containerPorts(t, "windowd", composeSvc(t, c, "windowd")); !slices.Contains(ports, port) {
		t.Errorf("windowd publishes %q, not http.listen's port %s", ports, port)
	}
	if exposed := dockerfile(t).final("EXPOSE"); !slices.ContainsFunc(exposed, func(e string) bool {
		return slices.Contains(strings.Fields(e), port) || slices.Contains(strings.Fields(e), port+"/tcp")
	}) {
		t.Errorf("Dockerfile EXPOSE %q does not hold http.listen's port %s", exposed, port)
	}

	// Prometheus scrapes windowd at that port.
	p := composeSvc(t, c, "prometheus")
	file = hostPath(t, "prometheus", mountAt(t, "prometheus", p, "/etc/prometheus/prometheus.yml"))
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var prom struct {
		ScrapeConfigs []struct {
			JobName        string `yaml:"job_name"`
			ScrapeInterval string `yaml:"scrape_interval"`
			MetricsPath    string `yaml:"metrics_path"`
			StaticConfigs  []struct {
				Targets []string `yaml:"targets"`
			} `yaml:"static_configs"`
		} `yaml:"scrape_configs"`
	}
	if err := yaml.Unmarshal(data, &prom); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	want := net.JoinHostPort("windowd", port)
	found := false
	for _, sc := range prom.ScrapeConfigs {
		for _, st := range sc.StaticConfigs {
			if !slices.Contains(st.Targets, want) {
				continue
			}
			found = true
			if sc.MetricsPath != "" && sc.MetricsPath != "/metrics" {
				t.Errorf("%s: job %s scrapes %s, want /metrics", file, sc.JobName, sc.MetricsPath)
			}
			if sc.ScrapeInterval != "5s" {
				t.Errorf("%s: job %s scrape_interval %q, want 5s", file, sc.JobName, sc.ScrapeInterval)
			}
		}
	}
	if !found {
		t.Errorf("%s: no scrape target %s", file, want)
	}
}

// grafanaProvisioning returns the repository directory mounted as Grafana's
// provisioning directory.
func grafanaProvisioning(t *testing.T, c composeFile) string {
	t.Helper()
	g := composeSvc(t, c, "grafana")
	dir := environment(t, "grafana", g)["GF_PATHS_PROVISIONING"]
	if dir == "" {
		dir = "/etc/grafana/provisioning"
	}
	return resolveMounted(t, "grafana", g, dir)
}

// provisionedFiles lists the YAML files of a provisioning subdirectory.
func provisionedFiles(t *testing.T, dir string) []string {
	t.Helper()
	var files []string
	for _, pat := range []string{"*.yml", "*.yaml"} {
		m, _ := filepath.Glob(filepath.Join(dir, pat))
		files = append(files, m...)
	}
	if len(files) == 0 {
		t.Fatalf("no provisioning files in %s", dir)
	}
	return files
}

type grafanaDatasource struct {
	Name      string `yaml:"name"`
	UID       string `yaml:"uid"`
	Type      string `yaml:"type"`
	URL       string `yaml:"url"`
	IsDefault bool   `yaml:"isDefault"`
}

func grafanaDatasources(t *testing.T, c composeFile) []grafanaDatasource {
	t.Helper()
	var all []grafanaDatasource
	for _, f := range provisionedFiles(t, filepath.Join(grafanaProvisioning(t, c), "datasources")) {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var ds struct {
			APIVersion  int                 `yaml:"apiVersion"`
			Datasources []grafanaDatasource `yaml:"datasources"`
		}
		if err := yaml.Unmarshal(data, &ds); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if ds.APIVersion != 1 {
			t.Errorf("%s: apiVersion %d, want 1", f, ds.APIVersion)
		}
		all = append(all, ds.Datasources...)
	}
	return all
}

func TestComposeGrafana(t *testing.T) {
	c := loadCompose(t)
	g := composeSvc(t, c, "grafana")
	env := environment(t, "grafana", g)
	if env["GF_AUTH_ANONYMOUS_ENABLED"] != "true" || env["GF_AUTH_ANONYMOUS_ORG_ROLE"] != "Viewer" {
		t.Errorf("grafana anonymous access: ENABLED %q, ORG_ROLE %q; want true, Viewer",
			env["GF_AUTH_ANONYMOUS_ENABLED"], env["GF_AUTH_ANONYMOUS_ORG_ROLE"])
	}

	// The Prometheus datasource points at the prometheus service's port.
	promPorts := containerPorts(t, "prometheus", composeSvc(t, c, "prometheus"))
	var prom *grafanaDatasource
	for _, ds := range grafanaDatasources(t, c) {
		if ds.Type == "prometheus" {
			prom = &ds
		}
	}
	if prom == nil {
		t.Fatal("no prometheus datasource is provisioned")
	}
	u, ok := strings.CutPrefix(prom.URL, "http://")
	if !ok {
		t.Fatalf("datasource URL %q, want http://prometheus:PORT", prom.URL)
	}
	host, port := splitHostPort(t, "datasource URL", strings.TrimSuffix(u, "/"))
	if host != "prometheus" || !slices.Contains(promPorts, port) {
		t.Errorf("datasource URL %q, want the prometheus service on one of its ports %q", prom.URL, promPorts)
	}

	// The dashboard provider loads the mounted dashboards directory.
	var paths []string
	for _, f := range provisionedFiles(t, filepath.Join(grafanaProvisioning(t, c), "dashboards")) {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var dp struct {
			Providers []struct {
				Type    string `yaml:"type"`
				Options struct {
					Path string `yaml:"path"`
				} `yaml:"options"`
			} `yaml:"providers"`
		}
		if err := yaml.Unmarshal(data, &dp); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, p := range dp.Providers {
			if p.Type == "file" || p.Type == "" {
				paths = append(paths, p.Options.Path)
			}
		}
	}
	if len(paths) == 0 {
		t.Fatal("no file dashboard provider is provisioned")
	}
	for _, p := range paths {
		dir := resolveMounted(t, "grafana", g, p)
		if _, err := os.Stat(filepath.Join(dir, "windowd.json")); err != nil {
			t.Errorf("dashboard provider path %s (%s): %v", p, dir, err)
		}
	}
	if home := env["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]; home != "" {
		if _, err := os.Stat(resolveMounted(t, "grafana", g, home)); err != nil {
			t.Errorf("GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH: %v", err)
		}
	}
}

var metricRE = regexp.MustCompile(`\bwindowd_[a-zA-Z0-9_]+`)

// dashboardQueries returns every PromQL text of the dashboard: panel target
// expressions (rows and nested panels included) and query variables.
func dashboardQueries(t *testing.T, dash map[string]any) []string {
	t.Helper()
	var qs []string
	var walkPanels func(ps []any)
	walkPanels = func(ps []any) {
		for _, p := range ps {
			pm, _ := p.(map[string]any)
			targets, _ := pm["targets"].([]any)
			for _, tg := range targets {
				if tm, ok := tg.(map[string]any); ok {
					if e, ok := tm["expr"].(string); ok {
						qs = append(qs, e)
					}
				}
			}
			if nested, ok := pm["panels"].([]any); ok {
				walkPanels(nested)
			}
		}
	}
	ps, _ := dash["panels"].([]any)
	walkPanels(ps)
	templating, _ := dash["templating"].(map[string]any)
	vars, _ := templating["list"].([]any)
	for _, v := range vars {
		vm, _ := v.(map[string]any)
		switch q := vm["query"].(type) {
		case string:
			qs = append(qs, q)
		case map[string]any:
			if s, ok := q["query"].(string); ok {
				qs = append(qs, s)
			}
		}
	}
	return qs
}

// baseMetric strips the series suffixes of a histogram.
func baseMetric(name string) string {
	for _, h := range histogramMetrics {
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if name == h+suffix {
				return h
			}
		}
	}
	return name
}

func loadDashboard(t *testing.T) (map[string]any, string) {
	t.Helper()
	file := filepath.Join(repoRoot, "deploy", "grafana", "dashboards", "windowd.json")
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var dash map[string]any
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return dash, file
}

func TestComposeDashboardMetrics(t *testing.T) {
	dash, file := loadDashboard(t)
	used := map[string]bool{}
	queries := dashboardQueries(t, dash)
	if len(queries) == 0 {
		t.Fatalf("%s: no queries", file)
	}
	for _, q := range queries {
		names := metricRE.FindAllString(q, -1)
		if len(names) == 0 {
			t.Errorf("%s: query %q uses no windowd_ metric", file, q)
		}
		for _, n := range names {
			b := baseMetric(n)
			if !slices.Contains(knownMetrics, b) {
				t.Errorf("%s: query %q uses %s, not a known windowd metric", file, q, n)
			}
			if slices.Contains(histogramMetrics, b) && n == b {
				t.Errorf("%s: query %q uses histogram %s without a _bucket/_sum/_count suffix", file, q, n)
			}
			used[b] = true
		}
	}
	for _, m := range knownMetrics {
		if !used[m] {
			t.Errorf("%s: no panel shows %s", file, m)
		}
	}
}

func TestComposeDashboardLayout(t *testing.T) {
	dash, file := loadDashboard(t)
	var titles []string
	ps, _ := dash["panels"].([]any)
	for _, p := range ps {
		pm, _ := p.(map[string]any)
		titles = append(titles, fmt.Sprint(pm["title"]))
	}
	for _, want := range []string{"Partition watermarks", "Frontier lag", "Panes by timing",
		"Late-dropped and dead-lettered rates", "Records in", "State size", "Idle partitions",
		"Open windows", "Commit latency p99"} {
		if !slices.Contains(titles, want) {
			t.Errorf("%s: no panel %q (panels: %q)", file, want, titles)
		}
	}

	// The pipeline variable, and the datasource every panel names, exist.
	templating, _ := dash["templating"].(map[string]any)
	vars, _ := templating["list"].([]any)
	hasPipeline := false
	for _, v := range vars {
		if vm, _ := v.(map[string]any); vm["name"] == "pipeline" {
			hasPipeline = true
		}
	}
	if !hasPipeline {
		t.Errorf("%s: no pipeline template variable", file)
	}
	uids := map[string]bool{}
	for _, ds := range grafanaDatasources(t, loadCompose(t)) {
		uids[ds.UID] = true
	}
	for _, p := range ps {
		pm, _ := p.(map[string]any)
		if pm["type"] == "row" {
			continue
		}
		ds, _ := pm["datasource"].(map[string]any)
		if uid := fmt.Sprint(ds["uid"]); !uids[uid] {
			t.Errorf("%s: panel %q uses datasource uid %q, not provisioned", file, pm["title"], uid)
		}
	}
}

// TestComposeMetricsExported checks the other side of knownMetrics: the
// service still registers every name the dashboard relies on.
func TestComposeMetricsExported(t *testing.T) {
	dir := filepath.Join(repoRoot, "service")
	files, _ := filepath.Glob(filepath.Join(dir, "*.go"))
	var src strings.Builder
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		src.Write(data)
	}
	if src.Len() == 0 {
		t.Skipf("no service sources in %s", dir)
	}
	for _, m := range knownMetrics {
		if !strings.Contains(src.String(), strconv.Quote(m)) {
			t.Errorf("%s does not register %s, which the dashboard queries", dir, m)
		}
	}
}

// dockerfileInstr is one instruction of a Dockerfile.
type dockerfileInstr struct {
	cmd, args string
	stage     int // index of the FROM it follows
}

type dockerfileInfo struct {
	instrs []dockerfileInstr
	stages int
}

// dockerfile parses the repository's Dockerfile into instructions, joining
// continuation lines and dropping comments.
func dockerfile(t *testing.T) dockerfileInfo {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	var d dockerfileInfo
	stage := -1
	var cur strings.Builder
	for _, line := range strings.Split(string(data), "\n") {
		trimmed := strings.TrimSpace(line)
		if cur.Len() == 0 && (trimmed == "" || strings.HasPrefix(trimmed, "#")) {
			continue
		}
		if cur.Len() > 0 && strings.HasPrefix(trimmed, "#") {
			continue // a comment inside a continued instruction
		}
		if s, ok := strings.CutSuffix(trimmed, "\\"); ok {
			cur.WriteString(s + " ")
			continue
		}
		cur.WriteString(trimmed)
		cmd, args, _ := strings.Cut(cur.String(), " ")
		cur.Reset()
		cmd = strings.ToUpper(cmd)
		if cmd == "FROM" {
			stage++
		}
		d.instrs = append(d.instrs, dockerfileInstr{cmd: cmd, args: strings.TrimSpace(args), stage: stage})
	}
	d.stages = stage + 1
	return d
}

// final returns the arguments of every cmd instruction of the last stage.
func (d dockerfileInfo) final(cmd string) []string {
	var out []string
	for _, in := range d.instrs {
		if in.stage == d.stages-1 && in.cmd == cmd {
			out = append(out, in.args)
		}
	}
	return out
}

// finalJSON returns the exec-form (JSON array) arguments of the last cmd
// instruction of the last stage.
func (d dockerfileInfo) finalJSON(t *testing.T, cmd string) []string {
	t.Helper()
	all := d.final(cmd)
	if len(all) == 0 {
		t.Fatalf("Dockerfile: the final stage has no %s", cmd)
	}
	var args []string
	if err := json.Unmarshal([]byte(all[len(all)-1]), &args); err != nil {
		t.Fatalf("Dockerfile: %s %s is not the exec (JSON array) form: %v", cmd, all[len(all)-1], err)
	}
	return args
}

func TestComposeDockerfile(t *testing.T) {
	d := dockerfile(t)
	if d.stages < 2 {
		t.Fatalf("Dockerfile has %d stage(s), want a multi-stage build", d.stages)
	}
	var froms []string
	for _, in := range d.instrs {
		if in.cmd == "FROM" {
			froms = append(froms, in.args)
		}
	}
	if !strings.HasPrefix(froms[0], "golang:") {
		t.Errorf("Dockerfile builds FROM %s, want a golang image", froms[0])
	}
	if !strings.Contains(froms[len(froms)-1], "distroless") && !strings.HasPrefix(froms[len(froms)-1], "scratch") {
		t.Errorf("Dockerfile runs FROM %s, want distroless or scratch", froms[len(froms)-1])
	}
	copied := false
	for _, c := range d.final("COPY") {
		if strings.HasPrefix(c, "--from=") {
			copied = true
		}
	}
	if !copied {
		t.Error("Dockerfile: the final stage copies nothing from the build stage")
	}

	users := d.final("USER")
	if len(users) == 0 {
		t.Fatal("Dockerfile: the final stage sets no USER (it would run as root)")
	}
	user, _, _ := strings.Cut(users[len(users)-1], ":")
	if user == "root" || user == "0" {
		t.Errorf("Dockerfile: final USER %s is root", users[len(users)-1])
	}
	if ep := d.finalJSON(t, "ENTRYPOINT"); len(ep) != 1 || path.Base(ep[0]) != "windowd" {
		t.Errorf("Dockerfile: ENTRYPOINT %q, want the windowd binary", ep)
	}
	if cmd := d.finalJSON(t, "CMD"); len(cmd) == 0 || cmd[0] != "run" {
		t.Errorf("Dockerfile: CMD %q, want run --config FILE", cmd)
	}

	// The build stamps the VERSION argument into the binary (the context
	// has no .git for go build to stamp), and checks it took.
	var args, runs []string
	for _, in := range d.instrs {
		switch {
		case in.cmd == "ARG" && in.stage == 0:
			args = append(args, in.args)
		case in.cmd == "RUN":
			runs = append(runs, in.args)
		}
	}
	build := strings.Join(runs, "\n")
	if !slices.Contains(args, "VERSION") || !strings.Contains(build, "-X main.stampedVersion=${VERSION}") || !strings.Contains(build, `windowd version | grep -F "windowd ${VERSION} "`) {
		t.Errorf("Dockerfile: the build stage must take ARG VERSION, stamp it with -X main.stampedVersion=${VERSION} and check windowd version; ARGs %q", args)
	}
}

// TestComposeDockerignore checks that the build context keeps what the image
// needs. It understands the subset of .dockerignore syntax the file uses:
// root-anchored path.Match patterns, a leading "**/", and "!" exceptions.
func TestComposeDockerignore(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(repoRoot, ".dockerignore"))
	if err != nil {
		t.Fatal(err)
	}
	var patterns []string
	for _, line := range strings.Split(string(data), "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			patterns = append(patterns, line)
		}
	}
	matches := func(pattern, p string) bool {
		pattern = strings.TrimPrefix(path.Clean(strings.TrimPrefix(pattern, "/")), "./")
		anyDir := strings.HasPrefix(pattern, "**/")
		pattern = strings.TrimPrefix(pattern, "**/")
		// A pattern excludes a path when it matches the path or a parent.
		for q := p; q != "." && q != "/"; q = path.Dir(q) {
			candidates := []string{q}
			if anyDir {
				for s := q; strings.Contains(s, "/"); {
					_, s, _ = strings.Cut(s, "/")
					candidates = append(candidates, s)
				}
			}
			for _, c := range candidates {
				if ok, _ := path.Match(pattern, c); ok {
					return true
				}
			}
		}
		return false
	}
	excluded := func(p string) bool {
		ex := false
		for _, pat := range patterns {
			if neg, ok := strings.CutPrefix(pat, "!"); ok {
				if matches(neg, p) {
					ex = false
				}
			} else if matches(pat, p) {
				ex = true
			}
		}
		return ex
	}
	needed := []string{"go.mod", "go.sum", "cmd/windowd/main.go", "config/load.go", "configs/docker-compose.yaml"}
	for _, in := range dockerfile(t).instrs {
		if in.cmd != "COPY" || strings.Contains(in.args, "--from=") {
			continue
		}
		fields := strings.Fields(in.args)
		for _, src := range fields[:len(fields)-1] {
			if !strings.HasPrefix(src, "--") && src != "." {
				needed = append(needed, src)
			}
		}
	}
	slices.Sort(needed)
	for _, p := range slices.Compact(needed) {
		if excluded(p) {
			t.Errorf(".dockerignore excludes %s, which the image build needs", p)
		}
		if _, err := os.Stat(filepath.Join(repoRoot, p)); err != nil {
			t.Errorf("the image build needs %s: %v", p, err)
		}
	}
	for _, p := range []string{".git", "replay.test", "data/000001.sst", "bench/out/x"} {
		if !excluded(p) {
			t.Errorf(".dockerignore does not exclude %s", p)
		}
	}
}

// docker-compose.cluster.yml, laid over docker-compose.yml, is a three-node
// KRaft quorum with replication 3 and min ISR 2 everywhere, and windowd's
// cluster config names every node (docs/OPERATIONS.md, Broker failures).
func TestComposeCluster(t *testing.T) {
	base, over := loadCompose(t), loadComposeFile(t, "docker-compose.cluster.yml")
	nodes := []string{"kafka", "kafka-2", "kafka-3"}
	var voters []string
	for i, name := range nodes {
		voters = append(voters, fmt.Sprintf("%d@%s:9093", i+1, name))
	}
	var plaintext []string
	for i, name := range nodes {
		env := environment(t, name, composeSvc(t, over, name))
		want := map[string]string{
			"KAFKA_NODE_ID":                                          strconv.Itoa(i + 1),
			"KAFKA_CONTROLLER_QUORUM_VOTERS":                         strings.Join(voters, ","),
			"KAFKA_DEFAULT_REPLICATION_FACTOR":                       "3",
			"KAFKA_MIN_INSYNC_REPLICAS":                              "2",
			"KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR":                 "3",
			"KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR":         "3",
			"KAFKA_TRANSACTION_STATE_LOG_MIN_ISR":                    "2",
			"KAFKA_SHARE_COORDINATOR_STATE_TOPIC_REPLICATION_FACTOR": "3",
		}
		for k, v := range want {
			if env[k] != v {
				t.Errorf("%s: %s = %q, want %q", name, k, env[k], v)
			}
		}
		if env["CLUSTER_ID"] == "" || env["CLUSTER_ID"] != environment(t, "kafka", composeSvc(t, over, "kafka"))["CLUSTER_ID"] {
			t.Errorf("%s: CLUSTER_ID %q, want kafka's", name, env["CLUSTER_ID"])
		}
		for _, l := range strings.Split(env["KAFKA_ADVERTISED_LISTENERS"], ",") {
			if addr, ok := strings.CutPrefix(strings.TrimSpace(l), "PLAINTEXT://"); ok {
				plaintext = append(plaintext, addr)
			}
		}
		if name != "kafka" {
			s := composeSvc(t, over, name)
			if s.Image != composeSvc(t, base, "kafka").Image {
				t.Errorf("%s: image %q, want kafka's %q", name, s.Image, composeSvc(t, base, "kafka").Image)
			}
			if !strings.Contains(fmt.Sprint(s.Healthcheck["test"]), "kafka-broker-api-versions.sh") {
				t.Errorf("%s: no broker healthcheck", name)
			}
			for _, m := range mounts(t, name, s) {
				if _, ok := over.Volumes[m.source]; !m.bind && !ok {
					t.Errorf("%s uses volume %q, not declared under volumes:", name, m.source)
				}
			}
			if cond := dependsOn(t, "windowd", composeSvc(t, over, "windowd"))[name]; cond != "service_healthy" {
				t.Errorf("windowd depends on %s with condition %q, want service_healthy", name, cond)
			}
		}
	}
	if cmd := fmt.Sprint(composeSvc(t, over, "kafka-init").Command); !strings.Contains(cmd, "--replication-factor 3") {
		t.Errorf("kafka-init creates the input topics without --replication-factor 3: %s", cmd)
	}
	// windowd's config (the override's mount at the base's --config path)
	// loads and names every node's PLAINTEXT listener.
	w := composeSvc(t, over, "windowd")
	w.Command = composeSvc(t, base, "windowd").Command
	file := hostPath(t, "windowd", mountAt(t, "windowd", w, configPath(t, w)))
	cfg, err := config.Load(file)
	if err != nil {
		t.Fatalf("%s does not load:\n%v", file, err)
	}
	if !slices.Equal(cfg.Kafka.Brokers, plaintext) {
		t.Errorf("%s: brokers %q, want every node's PLAINTEXT listener %q", file, cfg.Kafka.Brokers, plaintext)
	}
}
