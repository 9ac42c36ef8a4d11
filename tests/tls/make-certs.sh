#!/bin/sh
# Test certificates for the TLS tests: a CA, a server certificate for
# 127.0.0.1/localhost and client certificates it signed (client, and viewer
# and stranger with one-word CNs, for the control roles), and a second CA
# with a client certificate of its own, which the first CA's servers must
# refuse. EC P-256 keys, valid for two days: made fresh by each test run.
#
#   make-certs.sh DIR
set -eu
dir=$1
mkdir -p "$dir"
cd "$dir"
key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }
ca() { # name subject
    key "$1.key"
    openssl req -x509 -new -key "$1.key" -out "$1.crt" -days 2 -subj "/CN=$2" \
        -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign" \
        2>/dev/null
}
leaf() { # name ca subject extensions
    key "$1.key"
    openssl req -new -key "$1.key" -out "$1.csr" -subj "/CN=$3" 2>/dev/null
    printf '%s\n' "$4" >"$1.ext"
    openssl x509 -req -in "$1.csr" -CA "$2.crt" -CAkey "$2.key" -CAcreateserial -days 2 \
        -extfile "$1.ext" -out "$1.crt" 2>/dev/null
    rm -f "$1.csr" "$1.ext"
}
ca ca "activator test CA"
ca other-ca "another CA"
leaf server ca 127.0.0.1 \
    "subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:127.0.0.1
extendedKeyUsage=serverAuth,clientAuth"
leaf client ca "activator test client" "extendedKeyUsage=clientAuth"
leaf viewer ca viewer-1 "extendedKeyUsage=clientAuth"
leaf stranger ca stranger-1 "extendedKeyUsage=clientAuth"
leaf other-client other-ca "a client of another CA" "extendedKeyUsage=clientAuth"
chmod 600 ./*.key
