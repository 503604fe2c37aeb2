package config

import (
	"errors"
	"fmt"
	"strconv"

	yamlv3 "go.yaml.in/yaml/v3"

	"github.com/egress-proxies/egress-proxies-operator/operator/internal/providers"
)

// keyLines maps each key of a YAML document, by its path
// ("providers[0].gc.minAge"), to its line, so that a refused key is shown
// where the file has it.
type keyLines map[string]int

// indexKeyLines reads the document's node tree (go.yaml.in/yaml/v3, the
// YAML library sigs.k8s.io/yaml itself builds on); a document it cannot
// read gives no lines, and the errors are then shown without them.
func indexKeyLines(data []byte) keyLines {
	var doc yamlv3.Node
	lines := keyLines{}
	if yamlv3.Unmarshal(data, &doc) == nil {
		lines.walk("", &doc)
	}
	return lines
}

func (l keyLines) walk(path string, n *yamlv3.Node) {
	switch n.Kind {
	case yamlv3.DocumentNode:
		for _, c := range n.Content {
			l.walk(path, c)
		}
	case yamlv3.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			key := joinPath(path, n.Content[i].Value)
			if _, seen := l[key]; !seen {
				l[key] = n.Content[i].Line
			}
			l.walk(key, n.Content[i+1])
		}
	case yamlv3.SequenceNode:
		for i, c := range n.Content {
			l.walk(path+"["+strconv.Itoa(i)+"]", c)
		}
	}
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// at places err, found decoding or validating what is at path, in the
// document: a strict decode's refused keys (providers.KeyErrors) become
// one error each, naming the key and its line; any other error is
// prefixed with path.
func (l keyLines) at(path string, err error) []error {
	prefix := ""
	if path != "" {
		prefix = path + ": "
	}
	var keys providers.KeyErrors
	if !errors.As(err, &keys) {
		return []error{fmt.Errorf("%s%w", prefix, err)}
	}
	errs := make([]error, 0, len(keys))
	for _, k := range keys {
		where := ""
		if line, ok := l[joinPath(path, k.Path)]; ok {
			where = fmt.Sprintf(" (line %d)", line)
		}
		errs = append(errs, fmt.Errorf("%s%s %q%s", prefix, k.Problem, k.Path, where))
	}
	return errs
}
