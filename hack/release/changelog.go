package main

import (
	"fmt"
	"strings"
)

const changelogFile = "CHANGELOG.md"

func sectionTitle(dir, version, date string) string {
	return fmt.Sprintf("%s %s (%s)", dir, version, date)
}

// release moves each module's entries from the changelog's Unreleased
// section (its "### <dir>" part) into a section of its own, "## <dir>
// <version> (<date>)", placed after Unreleased, newest first.
func release(text string, modules []string, version, date string) (string, error) {
	lines := strings.Split(text, "\n")
	start := index(lines, 0, func(l string) bool { return l == "## Unreleased" })
	if start < 0 {
		return "", fmt.Errorf("%s: no \"## Unreleased\" section", changelogFile)
	}
	end := index(lines, start+1, func(l string) bool { return strings.HasPrefix(l, "## ") })
	if end < 0 {
		end = len(lines)
	}
	unreleased := lines[start+1 : end]
	var sections []string
	for _, dir := range modules {
		var body []string
		unreleased, body = cut(unreleased, dir)
		if len(body) == 0 {
			body = []string{"- No changes of its own: released with the modules it requires."}
		}
		sections = append(sections, "## "+sectionTitle(dir, version, date), "")
		sections = append(sections, body...)
		sections = append(sections, "")
	}
	out := append([]string{}, lines[:start+1]...)
	out = append(out, unreleased...)
	if len(out) > 0 && out[len(out)-1] != "" {
		out = append(out, "")
	}
	out = append(out, sections...)
	out = append(out, lines[end:]...)
	return strings.Join(out, "\n"), nil
}

// cut removes the "### <dir>" part (its heading may say more after the
// directory) from section and returns what is left and the part's
// entries, blank lines at either end trimmed.
func cut(section []string, dir string) (rest, body []string) {
	heading := func(l string) bool {
		f := strings.Fields(strings.TrimPrefix(l, "### "))
		return strings.HasPrefix(l, "### ") && len(f) > 0 && f[0] == dir
	}
	i := index(section, 0, heading)
	if i < 0 {
		return section, nil
	}
	j := index(section, i+1, func(l string) bool { return strings.HasPrefix(l, "### ") })
	if j < 0 {
		j = len(section)
	}
	body = trimBlank(section[i+1 : j])
	rest = append(append([]string{}, section[:i]...), section[j:]...)
	return rest, body
}

func index(lines []string, from int, match func(string) bool) int {
	for i := from; i < len(lines); i++ {
		if match(lines[i]) {
			return i
		}
	}
	return -1
}

func trimBlank(lines []string) []string {
	for len(lines) > 0 && strings.TrimSpace(lines[0]) == "" {
		lines = lines[1:]
	}
	for len(lines) > 0 && strings.TrimSpace(lines[len(lines)-1]) == "" {
		lines = lines[:len(lines)-1]
	}
	return lines
}
