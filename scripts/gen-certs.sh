#!/usr/bin/env bash
# Generates a cluster CA and node / client certificates for raftkv's TLS
# (doc/deployment.md, "TLS"). Test and small-deployment use: the CA key is
# written next to the certificates, so keep the output directory private.
#
#   scripts/gen-certs.sh [--days N] OUT_DIR NAME[=SAN[,SAN...]]... [--client NAME]...
#
#   NAME=SANS   a node certificate: CN=NAME, usable as server and as client
#               (members present it to their peers), SANs = DNS:NAME plus the
#               given ones, e.g. node1=IP:10.0.0.1,DNS:db1.lan. The SANs must
#               name every address clients and peers dial.
#   --client N  a client certificate: CN=N, client use only (for servers
#               started with --client_cert_required).
#
# Writes OUT_DIR/ca.crt and ca.key (reused when present, so certificates added
# later are signed by the same CA), NAME.crt and NAME.key per certificate
# (EC P-256 keys, mode 0600). Example:
#   scripts/gen-certs.sh conf/tls node1=IP:10.0.0.1 node2=IP:10.0.0.2 \
#       node3=IP:10.0.0.3 --client ops
set -euo pipefail
usage() { sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
die() { echo "gen-certs.sh: $*" >&2; exit 2; }
command -v openssl >/dev/null || die "openssl is not installed (scripts/install-deps.sh installs it)"

DAYS=365
if [[ "${1:-}" == "--days" ]]; then
  [[ "${2:-}" =~ ^[0-9]+$ && "$2" -ge 1 ]] || die "--days needs a positive number"
  DAYS=$2; shift 2
fi
[[ $# -ge 2 ]] || usage
OUT=$1; shift
mkdir -p "$OUT"
umask 077

if [[ ! -f "$OUT/ca.crt" || ! -f "$OUT/ca.key" ]]; then
  openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$OUT/ca.key" 2>/dev/null
  openssl req -x509 -new -key "$OUT/ca.key" -sha256 -days "$DAYS" -subj "/CN=raftkv cluster CA" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
    -out "$OUT/ca.crt"
  echo "gen-certs.sh: new CA $OUT/ca.crt"
fi

# issue NAME SANS USAGE
issue() {
  local name=$1 sans=$2 usage=$3
  [[ "$name" =~ ^[A-Za-z0-9._-]+$ ]] || die "certificate name '$name' may hold only [A-Za-z0-9._-]"
  local ext; ext=$(mktemp)
  {
    echo "basicConstraints=critical,CA:FALSE"
    echo "keyUsage=critical,digitalSignature,keyEncipherment"
    echo "extendedKeyUsage=$usage"
    echo "subjectAltName=$sans"
  } >"$ext"
  openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$OUT/$name.key" 2>/dev/null
  if ! openssl req -new -key "$OUT/$name.key" -subj "/CN=$name" -out "$OUT/$name.csr" 2>/dev/null ||
     ! openssl x509 -req -in "$OUT/$name.csr" -CA "$OUT/ca.crt" -CAkey "$OUT/ca.key" \
         -CAcreateserial -days "$DAYS" -sha256 -extfile "$ext" -out "$OUT/$name.crt" 2>"$ext.err"; then
    cat "$ext.err" >&2; rm -f "$ext" "$ext.err"
    die "cannot issue '$name' (bad SAN list '$sans'? use IP:a.b.c.d or DNS:name)"
  fi
  rm -f "$ext" "$ext.err" "$OUT/$name.csr"
  echo "gen-certs.sh: $OUT/$name.crt (CN=$name, $sans, $usage)"
}

while [[ $# -gt 0 ]]; do
  case "$1" in
    --client)
      [[ -n "${2:-}" ]] || die "--client needs a name"
      issue "$2" "DNS:$2" clientAuth; shift 2 ;;
    -*) die "unknown option $1" ;;
    *=*)
      name=${1%%=*}; extra=${1#*=}
      issue "$name" "DNS:$name${extra:+,$extra}" serverAuth,clientAuth; shift ;;
    *)
      issue "$1" "DNS:$1" serverAuth,clientAuth; shift ;;
  esac
done
