package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
)

// version is the operator's release, set when the release image is linked
// (-ldflags "-X main.version=v0.1.0", images/recipes/operator/build.sh); a
// plain go build says devel.
var version = "devel"

// -version prints the release and the provider types compiled in, and
// exits: a binary in an image that has no shell can still say what it is.
// It is registered here, beside the variable, and runs during flag.Parse,
// after every providers_<type>.go has registered its constructor.
func init() {
	flag.BoolFunc("version", "Print the version and the provider types compiled in, and exit.", func(string) error {
		fmt.Printf("egress-proxies-operator %s (providers: %s)\n", version, strings.Join(constructors.Types(), " "))
		os.Exit(0)
		return nil
	})
}
