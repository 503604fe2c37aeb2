package osfake

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Nova's create-body schema, as far as the fake checks it. Every rule
// below is Nova Zed's (26.x) own, from
// nova/api/openstack/compute/schemas/servers.py (create, create_v219 …
// create_v290) and nova/api/validation/parameter_types.py (name, metadata,
// tag); the messages are the ones nova/api/validation/validators.py
// _SchemaValidator.validate writes around jsonschema's: "Invalid input for
// field/attribute <last element of the error's path>. Value: <the value as
// Python prints it>. <jsonschema's message>". They were checked by running
// that validator on the same bodies (TestCreateSchemaIsNovas).

// createKeys are the server object's properties, with the microversion
// that added each (servers.py create_v2xx) …
var createKeys = map[string]int{
	"name": 1, "imageRef": 1, "flavorRef": 1, "adminPass": 1, "metadata": 1, "networks": 1,
	"OS-DCF:diskConfig": 1, "accessIPv4": 1, "accessIPv6": 1, "personality": 1, "availability_zone": 1,
	"block_device_mapping": 1, "block_device_mapping_v2": 1, "config_drive": 1, "key_name": 1,
	"min_count": 1, "max_count": 1, "return_reservation_id": 1, "security_groups": 1, "user_data": 1,
	"description": 19, "tags": 52, "trusted_image_certificates": 63, "host": 74, "hypervisor_hostname": 74,
	"hostname": 90,
}

// … and the microversion that removed one (create_v257 pops personality).
var createKeysRemoved = map[string]int{"personality": 57}

// createTopKeys are the body's own properties (servers.py create:
// additionalProperties False beside them).
var createTopKeys = []string{"server", "os:scheduler_hints", "OS-SCH-HNT:scheduler_hints"}

const (
	// metadataKeyPattern is parameter_types.metadata's one
	// patternProperties key: no "/" (the issue-15 bug); values are strings
	// of at most 255 characters.
	metadataKeyPattern = `^[a-zA-Z0-9-_:. ]{1,255}$`
	// tagPattern, maxTagLength and maxTags are parameter_types.tag
	// (minLength 1, maxLength nova/objects/tag.py MAX_TAG_LENGTH) and
	// create_v252's maxItems (nova/objects/instance.py MAX_TAG_COUNT).
	tagPattern   = `^[^,/]*$`
	maxTagLength = 60
	maxTags      = 50
	// maxUserData is create's user_data maxLength (of the base64 text).
	maxUserData = 65535
)

var (
	metaKeyRE = regexp.MustCompile(metadataKeyPattern)
	tagRE     = regexp.MustCompile(tagPattern)
)

// invalidNameMessage is nova.exception.InvalidName for
// parameter_types.valid_name_regex, which validators.py reports as is.
const invalidNameMessage = "An invalid 'name' value was provided. The name must be: printable characters. Can not start or end with whitespace."

func schemaError(field string, value json.RawMessage, message string) string {
	return fmt.Sprintf("Invalid input for field/attribute %s. Value: %s. %s", field, pyRepr(value, false), message)
}

// checkCreate validates the create body at microversion v and returns
// Nova's 400 message, or "" when the schema takes it.
func checkCreate(body map[string]json.RawMessage, v microversion) string {
	for _, k := range slices.Sorted(mapsKeys(body)) {
		if !slices.Contains(createTopKeys, k) {
			return fmt.Sprintf("Additional properties are not allowed ('%s' was unexpected)", k)
		}
	}
	raw, ok := body["server"]
	if !ok {
		return "'server' is a required property"
	}
	var server map[string]json.RawMessage
	if json.Unmarshal(raw, &server) != nil || server == nil {
		return schemaError("server", raw, pyRepr(raw, true)+" is not of type 'object'")
	}
	for _, k := range slices.Sorted(mapsKeys(server)) {
		added, known := createKeys[k]
		removed, gone := createKeysRemoved[k]
		if !known || !v.atLeast(added) || (gone && v.atLeast(removed)) {
			return schemaError("server", raw, fmt.Sprintf("Additional properties are not allowed ('%s' was unexpected)", k))
		}
	}
	required := []string{"name", "flavorRef"}
	if v.atLeast(37) {
		required = append(required, "networks")
	}
	for _, k := range required {
		if _, ok := server[k]; !ok {
			return schemaError("server", raw, fmt.Sprintf("'%s' is a required property", k))
		}
	}
	if msg := checkName(server["name"]); msg != "" {
		return msg
	}
	if m, ok := server["metadata"]; ok {
		if msg := checkMetadata(m); msg != "" {
			return msg
		}
	}
	if t, ok := server["tags"]; ok {
		if msg := checkTags(t); msg != "" {
			return msg
		}
	}
	if n, ok := server["networks"]; ok && v.atLeast(37) {
		if msg := checkNetworks(n); msg != "" {
			return msg
		}
	}
	if u, ok := server["user_data"]; ok {
		if msg := checkUserData(u); msg != "" {
			return msg
		}
	}
	return ""
}

// checkName is parameter_types.name: a string of 1 to 255 characters,
// format "name" (printable, not starting or ending with whitespace).
func checkName(raw json.RawMessage) string {
	var name string
	if json.Unmarshal(raw, &name) != nil {
		return schemaError("name", raw, pyRepr(raw, true)+" is not of type 'string'")
	}
	switch n := utf8.RuneCountInString(name); {
	case n < 1:
		return schemaError("name", raw, pyRepr(raw, true)+" is too short")
	case n > 255:
		return schemaError("name", raw, pyRepr(raw, true)+" is too long")
	}
	first, _ := utf8.DecodeRuneInString(name)
	last, _ := utf8.DecodeLastRuneInString(name)
	if unicode.IsSpace(first) || unicode.IsSpace(last) || strings.IndexFunc(name, func(r rune) bool { return !unicode.IsPrint(r) && r != ' ' }) >= 0 {
		return invalidNameMessage
	}
	return ""
}

// checkMetadata is parameter_types.metadata.
func checkMetadata(raw json.RawMessage) string {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil || m == nil {
		return schemaError("metadata", raw, pyRepr(raw, true)+" is not of type 'object'")
	}
	// jsonschema's additionalProperties names every key that matches no
	// pattern, sorted ("'a', 'b' do not match …").
	var extras []string
	for _, k := range slices.Sorted(mapsKeys(m)) {
		if !metaKeyRE.MatchString(k) {
			extras = append(extras, pyString(k))
		}
	}
	if len(extras) > 0 {
		verb := "does"
		if len(extras) > 1 {
			verb = "do"
		}
		return schemaError("metadata", raw, fmt.Sprintf("%s %s not match any of the regexes: '%s'", strings.Join(extras, ", "), verb, metadataKeyPattern))
	}
	for _, k := range slices.Sorted(mapsKeys(m)) {
		var val string
		if json.Unmarshal(m[k], &val) != nil {
			return schemaError(k, m[k], pyRepr(m[k], true)+" is not of type 'string'")
		}
		if utf8.RuneCountInString(val) > 255 {
			return schemaError(k, m[k], pyString(val)+" is too long")
		}
	}
	return ""
}

// checkTags is create_v252's tags: an array of at most 50
// parameter_types.tag.
func checkTags(raw json.RawMessage) string {
	var tags []json.RawMessage
	if json.Unmarshal(raw, &tags) != nil {
		return schemaError("tags", raw, pyRepr(raw, true)+" is not of type 'array'")
	}
	if len(tags) > maxTags {
		return schemaError("tags", raw, pyRepr(raw, true)+" is too long")
	}
	for i, t := range tags {
		field := strconv.Itoa(i)
		if msg := checkTag(t); msg != "" {
			return schemaError(field, t, msg)
		}
	}
	return ""
}

// checkTag returns jsonschema's message for a tag parameter_types.tag
// refuses, or "".
func checkTag(raw json.RawMessage) string {
	var tag string
	if json.Unmarshal(raw, &tag) != nil {
		return pyRepr(raw, true) + " is not of type 'string'"
	}
	switch n := utf8.RuneCountInString(tag); {
	case n < 1:
		return pyString(tag) + " is too short"
	case n > maxTagLength:
		return pyString(tag) + " is too long"
	case !tagRE.MatchString(tag):
		return fmt.Sprintf("%s does not match '%s'", pyString(tag), tagPattern)
	}
	return ""
}

// uuidRE is jsonschema's "uuid" format as Nova registers it
// (validators.py _validate_uuid_format: uuidutils.is_uuid_like, which
// also takes it without dashes or in upper case).
var uuidRE = regexp.MustCompile(`^(?i)[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$`)

// checkNetworks is create_v237's (and create_v242's) networks: "none",
// "auto", or a list of objects of uuid (a UUID), port, fixed_ip and (from
// 2.42) tag, nothing else; jsonschema's oneOf reports any miss alike.
func checkNetworks(raw json.RawMessage) string {
	bad := schemaError("networks", raw, pyRepr(raw, true)+" is not valid under any of the given schemas")
	var word string
	if json.Unmarshal(raw, &word) == nil {
		if word == "none" || word == "auto" {
			return ""
		}
		return bad
	}
	var nets []map[string]json.RawMessage
	if json.Unmarshal(raw, &nets) != nil {
		return bad
	}
	for _, n := range nets {
		for k, val := range n {
			var s string
			switch k {
			case "uuid":
				if json.Unmarshal(val, &s) != nil || !uuidRE.MatchString(s) {
					return bad
				}
			case "port", "fixed_ip", "tag":
			default:
				return bad
			}
		}
	}
	return ""
}

// checkUserData is create's user_data: a string of at most 65535
// characters, format base64 (validators.py _validate_base64_format: oslo
// base64.decode_as_bytes, Python's b64decode without validate, which drops
// characters outside the alphabet and refuses a wrong padding).
func checkUserData(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return schemaError("user_data", raw, pyRepr(raw, true)+" is not of type 'string'")
	}
	if utf8.RuneCountInString(s) > maxUserData {
		return schemaError("user_data", raw, pyString(s)+" is too long")
	}
	kept := strings.Map(func(r rune) rune {
		if r < utf8.RuneSelf && (r == '+' || r == '/' || r == '=' || unicode.IsLetter(r) || unicode.IsDigit(r)) {
			return r
		}
		return -1
	}, s)
	if _, err := base64.StdEncoding.DecodeString(kept); err != nil {
		return schemaError("user_data", raw, pyString(s)+" is not a 'base64'")
	}
	return ""
}

// pyRepr prints a JSON value as Python prints the decoded value, objects
// in their order: with repr (quoted true, as jsonschema's messages do) or
// with "%s" (quoted false, as validators.py prints the Value), which
// leaves a string at the top unquoted.
func pyRepr(raw json.RawMessage, quoted bool) string {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var b strings.Builder
	var walk func(top bool) error
	walk = func(top bool) error {
		tok, err := dec.Token()
		if err != nil {
			return err
		}
		switch t := tok.(type) {
		case json.Delim:
			open, close := "[", "]"
			if t == '{' {
				open, close = "{", "}"
			}
			b.WriteString(open)
			for i := 0; dec.More(); i++ {
				if i > 0 {
					b.WriteString(", ")
				}
				if t == '{' {
					k, err := dec.Token()
					if err != nil {
						return err
					}
					b.WriteString(pyString(fmt.Sprint(k)) + ": ")
				}
				if err := walk(false); err != nil {
					return err
				}
			}
			if _, err := dec.Token(); err != nil {
				return err
			}
			b.WriteString(close)
		case string:
			if top && !quoted {
				b.WriteString(t)
			} else {
				b.WriteString(pyString(t))
			}
		case bool:
			b.WriteString(map[bool]string{true: "True", false: "False"}[t])
		case nil:
			b.WriteString("None")
		default:
			fmt.Fprint(&b, t)
		}
		return nil
	}
	if walk(true) != nil {
		return string(raw)
	}
	return b.String()
}

// pyString is Python's repr of a str: single quotes unless it holds one
// and no double quote.
func pyString(s string) string {
	if strings.Contains(s, "'") && !strings.Contains(s, `"`) {
		return `"` + s + `"`
	}
	return "'" + strings.ReplaceAll(s, "'", `\'`) + "'"
}
