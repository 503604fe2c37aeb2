package osfake

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
)

// novaSchemaScript runs Nova's own create_v252 request validator
// (nova/api/validation/validators.py _SchemaValidator over
// nova/api/openstack/compute/schemas/servers.py create_v252) on each line
// of its input and prints its 400 detail as JSON, "" for a body it takes.
const novaSchemaScript = `import json, sys, warnings
warnings.simplefilter("ignore")
from nova.api.validation import validators
from nova.api.openstack.compute.schemas import servers
from nova import exception
v = validators._SchemaValidator(servers.create_v252)
for line in sys.stdin:
    try:
        v.validate(json.loads(line)); print(json.dumps(""))
    except exception.ValidationError as e:
        print(json.dumps(e.kwargs.get("detail")))
`

// novaPython is the interpreter Debian 12's python3-nova installs into.
const novaPython = "/usr/bin/python3"

// NovaCreateSchema checks server create bodies with Nova's own validator
// at microversion 2.52, the provider's: for each body, "" if Nova's schema
// takes it, else the 400 detail Nova answers. ok is false where Nova's
// Python code is not installed (it is where the real-cloud lane ran), and
// the caller skips the comparison. Tests use it to hold the fake's schema
// (checkCreate) and the provider's requests to Nova's.
func NovaCreateSchema(ctx context.Context, bodies []string) (details []string, ok bool, err error) {
	if err := exec.CommandContext(ctx, novaPython, "-c", "import nova.api.validation").Run(); err != nil {
		return nil, false, nil //nolint:nilerr // no Nova to compare with is no error: the caller skips
	}
	cmd := exec.CommandContext(ctx, novaPython, "-c", novaSchemaScript)
	cmd.Stdin = strings.NewReader(strings.Join(bodies, "\n") + "\n")
	out, err := cmd.Output()
	if err != nil {
		return nil, true, fmt.Errorf("nova's validator: %w", err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		var d string
		if err := json.Unmarshal([]byte(line), &d); err != nil {
			return nil, true, fmt.Errorf("nova's validator printed %q: %w", line, err)
		}
		details = append(details, d)
	}
	if len(details) != len(bodies) {
		return nil, true, fmt.Errorf("nova's validator answered %d of %d bodies: %s", len(details), len(bodies), out)
	}
	return details, true, nil
}
