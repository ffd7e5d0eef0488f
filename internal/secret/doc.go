// Package secret is a cluster's join secret: 128 bits from crypto/rand that
// the first node of a cluster without mutual TLS writes into its data
// directory (FileName, mode 0600). Whoever presents it — in the Header
// metadata of a gRPC call — holds the operator role (DESIGN.md 7), and a
// node presents it to join. With mutual TLS there is no join secret: the
// operators are principals named in configuration and peers prove
// themselves with their certificates.
//
// Its text form is 32 lower-case hex digits. It is compared in constant
// time, and never logged.
package secret
