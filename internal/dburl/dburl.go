// Package dburl tells a PostgreSQL URL from a SQLite path and hides a
// URL's password for logs: the two things superstep's command and package
// serve both need of a --db value.
package dburl

import "strings"

// IsPostgres reports whether db names a PostgreSQL database rather than a
// SQLite file.
func IsPostgres(db string) bool {
	return strings.HasPrefix(db, "postgres://") || strings.HasPrefix(db, "postgresql://")
}

// Redact hides a password in a PostgreSQL URL; anything else is returned
// as it is.
func Redact(db string) string {
	if !IsPostgres(db) {
		return db
	}
	scheme, rest, _ := strings.Cut(db, "://")
	userinfo, hostpart, ok := strings.Cut(rest, "@")
	if !ok {
		return db
	}
	user, _, hasPass := strings.Cut(userinfo, ":")
	if !hasPass {
		return db
	}
	return scheme + "://" + user + ":xxxxx@" + hostpart
}
