package contracttest

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

// The contract document and the harness must name the same rules, and the
// document's axis table must match the spec template's entries: a rule or
// an axis renamed in one place and not the other fails here.

func readDoc(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile("../../docs/" + name)
	if os.IsNotExist(err) {
		t.Skipf("skipped: docs/%s is not beside this module (built from the module cache)", name)
	}
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestContractDocNamesEveryRule(t *testing.T) {
	doc := readDoc(t, "provider-contract.md")
	start := strings.Index(doc, "## 11. ")
	end := strings.Index(doc, "## 12. ")
	if start < 0 || end < start {
		t.Fatal("provider-contract.md has no §11")
	}
	section := doc[start:end]
	for _, name := range RuleNames() {
		if !strings.Contains(section, "`"+name+"`") {
			t.Errorf("rule %s is not in provider-contract.md §11", name)
		}
	}
}

func TestAxisTableMatchesTemplate(t *testing.T) {
	contract := readDoc(t, "provider-contract.md")
	template := readDoc(t, "provider-spec-template.md")

	entries := map[string]string{} // entry number → its heading
	for _, m := range regexp.MustCompile(`(?m)^## (\d+)\. (.*)$`).FindAllStringSubmatch(template, -1) {
		entries[m[1]] = m[2]
	}
	rows := regexp.MustCompile("(?m)^\\| `([a-z-]+)` \\| (4\\.\\d+) \\| (\\d+) \\|$").FindAllStringSubmatch(contract, -1)
	if len(rows) != 19 {
		t.Fatalf("§4.20 has %d axis rows, want 19", len(rows))
	}
	for _, row := range rows {
		axis, section, entry := row[1], row[2], row[3]
		if !strings.Contains(entries[entry], "`"+axis+"`") {
			t.Errorf("§4.20 maps %s to entry %s, whose heading is %q", axis, entry, entries[entry])
		}
		if !strings.Contains(contract, "### "+section+" `"+axis+"`") {
			t.Errorf("§4.20 says %s is §%s, but there is no heading \"### %s `%s`\"", axis, section, section, axis)
		}
	}
}

func TestTemplateCitesOnlyExistingSections(t *testing.T) {
	contract := readDoc(t, "provider-contract.md")
	template := readDoc(t, "provider-spec-template.md")
	for _, m := range regexp.MustCompile(`§(\d+)(\.\d+)?`).FindAllStringSubmatch(template, -1) {
		top, sub := m[1], m[2]
		if !strings.Contains(contract, "## "+top+". ") {
			t.Errorf("the template cites §%s%s; the contract has no section %s", top, sub, top)
		}
		if sub != "" && !strings.Contains(contract, "§"+top+sub+" ") && !strings.Contains(contract, "### "+top+sub+" ") {
			t.Errorf("the template cites §%s%s; the contract has no such subsection", top, sub)
		}
	}
}
