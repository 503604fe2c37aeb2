package contract_test

import (
	"errors"
	"regexp"
	"strings"
	"testing"

	"github.com/egress-proxies/egress-proxies-operator/contract"
)

var (
	located = contract.IDFormat{
		Location: regexp.MustCompile(`^[a-z0-9-]{1,32}$`),
		Key:      regexp.MustCompile(`^[a-z0-9-]{1,63}$`),
	}
	keyOnly = contract.IDFormat{Key: regexp.MustCompile(`^[0-9a-f-]{36}$`)}
)

func TestIDFormatRoundTrip(t *testing.T) {
	id := located.Format("eu-1", "proxy-a")
	if id != "eu-1/proxy-a" {
		t.Fatalf("Format = %q", id)
	}
	loc, key, err := located.Parse(id)
	if err != nil || loc != "eu-1" || key != "proxy-a" {
		t.Fatalf("Parse(%q) = %q, %q, %v", id, loc, key, err)
	}
	uuid := "0b7f8e7e-5a0c-4c43-9d2e-6f0e2b1a7c55"
	if _, key, err := keyOnly.Parse(keyOnly.Format("ignored", uuid)); err != nil || key != uuid {
		t.Fatalf("location-free round trip: %q, %v", key, err)
	}
}

func TestIDFormatRejectsMalformed(t *testing.T) {
	for _, id := range []string{
		"", "eu-1", "/proxy-a", "eu-1/", "eu-1/proxy-a/extra", "EU-1/proxy-a",
		"eu-1/proxy a", "../etc/passwd", "eu-1/" + strings.Repeat("a", 600),
	} {
		_, _, err := located.Parse(id)
		if !errors.Is(err, contract.ErrPermanent) {
			t.Errorf("Parse(%q) = %v, want ErrPermanent", id, err)
			continue
		}
		var fe *contract.FieldError
		if !errors.As(err, &fe) || fe.Field != "providerID" {
			t.Errorf("Parse(%q): error does not name the field: %v", id, err)
		}
	}
	if _, _, err := keyOnly.Parse("eu-1/0b7f8e7e-5a0c-4c43-9d2e-6f0e2b1a7c55"); err == nil {
		t.Error("location-free format accepted a location")
	}
}

func FuzzIDFormatParse(f *testing.F) {
	for _, seed := range []string{"eu-1/proxy-a", "", "/", "a/b/c", "\x00/\xff"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, id string) {
		loc, key, err := located.Parse(id)
		if err != nil {
			if !errors.Is(err, contract.ErrPermanent) {
				t.Fatalf("Parse(%q) error of the wrong class: %v", id, err)
			}
			return
		}
		if got := located.Format(loc, key); got != id {
			t.Fatalf("Parse then Format changed %q into %q", id, got)
		}
	})
}
