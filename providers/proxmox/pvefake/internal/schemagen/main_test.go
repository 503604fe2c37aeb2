package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestCommittedFactsAreGenerated regenerates the facts from the pinned
// schema and fails when the committed files differ (or one is missing):
// the fake's validation and permissions come from the pinned input only.
func TestCommittedFactsAreGenerated(t *testing.T) {
	dir := filepath.Join("..", "..", "schema")
	outs, err := GenerateAll(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(outs) < 2 {
		t.Fatalf("generated %d facts files, want one per pinned version (8 and 9)", len(outs))
	}
	for name, want := range outs {
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatalf("%s: %v (run make generate-pvefake-schema)", name, err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from what the pinned schema generates; run make generate-pvefake-schema", name)
		}
	}
	committed, _ := filepath.Glob(filepath.Join(dir, "facts-*.json"))
	if len(committed) != len(outs) {
		t.Errorf("%d committed facts files, %d generated: a stale one is left", len(committed), len(outs))
	}
}

// TestGenerateRefusesAMissingEndpoint: a schema without an endpoint the
// fake serves is an error, not a silently smaller fake.
func TestGenerateRefusesAMissingEndpoint(t *testing.T) {
	_, err := Generate([]byte(`const apiSchema = [{"path":"/version","info":{"GET":{"parameters":{}}}}];`), Source{Version: "9.1.3"})
	if err == nil {
		t.Fatal("want an error for a schema without /cluster/nextid")
	}
}
