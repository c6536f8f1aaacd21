package perms

import (
	"encoding/json"
	"strconv"
	"strings"
)

// Config is p as a nats-server configuration block, to put in a user's entry of an
// authorization or accounts section: `permissions: { publish: { allow: [...] },
// subscribe: { allow: [...] } }`, one subject a line.
func (p Permissions) Config() string {
	var b strings.Builder
	b.WriteString("permissions: {\n")
	list(&b, "publish", p.Publish)
	list(&b, "subscribe", p.Subscribe)
	b.WriteString("}\n")
	return b.String()
}

func list(b *strings.Builder, what string, subjects []string) {
	b.WriteString("  " + what + ": {\n    allow: [\n")
	for _, s := range subjects {
		b.WriteString("      " + strconv.Quote(s) + "\n")
	}
	b.WriteString("    ]\n  }\n")
}

// jwtPermissions is the shape of the permissions in a NATS user JWT's claims
// (github.com/nats-io/jwt/v2 Permissions).
type jwtPermissions struct {
	Pub jwtList `json:"pub"`
	Sub jwtList `json:"sub"`
}

type jwtList struct {
	Allow []string `json:"allow"`
}

// JSON is p as the permissions of a user JWT's claims, {"pub":{"allow":[…]},
// "sub":{"allow":[…]}}: what jwt.Permissions unmarshals, for a program that issues
// user JWTs.
func (p Permissions) JSON() []byte {
	b, _ := json.MarshalIndent(jwtPermissions{Pub: jwtList{p.Publish}, Sub: jwtList{p.Subscribe}}, "", "  ")
	return append(b, '\n')
}

// NSC is p as the flags of `nsc add user` or `nsc edit user`, which write them into
// the user's JWT: --allow-pub and --allow-sub, each with a comma-separated list.
func (p Permissions) NSC() string {
	return "--allow-pub " + shellQuote(strings.Join(p.Publish, ",")) +
		" --allow-sub " + shellQuote(strings.Join(p.Subscribe, ","))
}

// shellQuote quotes s for a POSIX shell: subjects hold '$', '>' and '*'.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
