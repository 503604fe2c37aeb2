// Package credtest runs the operator as main does (app.Run, with a
// providers config file and --credentials-dir) and checks that credential
// files that appear late or rotate are picked up without a restart. It has
// only tests, in a package of its own: app.Run registers process-wide
// metrics and controller names, so each test binary runs it once.
package credtest
