package main

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
)

// loadAPIKeys reads an API key file: one key per line, optionally followed
// by whitespace and the owner identity; blank lines and lines starting
// with # are skipped. A key without an owner gets "key-" and a digest of
// the key as its owner, so the stored owner never reveals the key.
func loadAPIKeys(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("api keys: %w", err)
	}
	defer f.Close()
	keys := map[string]string{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) > 2 {
			return nil, fmt.Errorf("api keys: %s:%d: want 'key' or 'key owner', got %d fields", path, n, len(fields))
		}
		owner := keyOwner(fields[0])
		if len(fields) == 2 {
			owner = fields[1]
		}
		if _, dup := keys[fields[0]]; dup {
			return nil, fmt.Errorf("api keys: %s:%d: duplicate key", path, n)
		}
		keys[fields[0]] = owner
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("api keys: %s: %w", path, err)
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("api keys: %s holds no key; leave --api-keys unset to turn authentication off", path)
	}
	return keys, nil
}

func keyOwner(key string) string {
	sum := sha256.Sum256([]byte(key))
	return "key-" + hex.EncodeToString(sum[:6])
}
