package pvefake

//go:generate go run ./internal/schemagen -dir schema
