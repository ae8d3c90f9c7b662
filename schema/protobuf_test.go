package schema

import (
	"strings"
	"testing"
)

func TestCompileProtoFile(t *testing.T) {
	cases := []struct {
		name string
		main string
		deps map[string]string
		err  string // a substring of the error; "": none
	}{
		{"syntax error", "syntax = \"proto3\";\nmessage M {\n  int32 x = ;\n}\n", nil,
			`<schema>:3:13: syntax error: unexpected ';'`},
		{"syntax error in a dep", "syntax = \"proto3\";\nimport \"d.proto\";\n",
			map[string]string{"d.proto": "syntax = \"proto3\";\nmessage {"}, `d.proto:2:9: syntax error`},
		{"unknown type", "syntax = \"proto3\";\nmessage M {\n  Nope x = 1;\n}\n", nil,
			`<schema>:3:3: field M.x: unknown type Nope`},
		{"missing import", "syntax = \"proto3\";\nimport \"gone.proto\";\n", nil, `gone.proto`},
		{"well-known type not imported", "syntax = \"proto3\";\nmessage M {\n  google.protobuf.Timestamp t = 1;\n}\n",
			nil, `unknown type google.protobuf.Timestamp`},
		{"transitive deps", "syntax = \"proto3\";\nimport \"a.proto\";\nmessage M {\n  b.B x = 1;\n}\n",
			map[string]string{
				"a.proto": "syntax = \"proto3\";\nimport public \"b/b.proto\";\n",
				"b/b.proto": "syntax = \"proto3\";\npackage b;\nimport \"google/protobuf/empty.proto\";\n" +
					"message B {\n  google.protobuf.Empty e = 1;\n}\n",
			}, ""},
		{"a dep's copy of a standard import is not used", "syntax = \"proto3\";\nimport \"google/protobuf/timestamp.proto\";\n" +
			"message M {\n  google.protobuf.Timestamp t = 1;\n}\n",
			map[string]string{"google/protobuf/timestamp.proto": "not a proto file"}, ""},
		{"editions", "edition = \"2023\";\nmessage M {\n  int32 x = 1;\n}\n", nil, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fd, err := compileProtoFile(c.main, c.deps)
			if c.err == "" {
				if err != nil {
					t.Fatal(err)
				}
				if fd.Path() != protoMainFile || fd.Messages().Len() != 1 {
					t.Errorf("file %s with %d messages", fd.Path(), fd.Messages().Len())
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Fatalf("err %v, want one with %q", err, c.err)
			}
		})
	}
}
