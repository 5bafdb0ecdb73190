#include "ops/tls_check.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>
#include <openssl/x509v3.h>

#include <memory>
#include <vector>

namespace raftkv {
namespace {

struct Free {
  void operator()(BIO* p) const { BIO_free(p); }
  void operator()(X509* p) const { X509_free(p); }
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
  void operator()(X509_STORE* p) const { X509_STORE_free(p); }
  void operator()(X509_STORE_CTX* p) const { X509_STORE_CTX_free(p); }
  void operator()(STACK_OF(X509)* p) const { sk_X509_pop_free(p, X509_free); }
};
template <class T>
using Owned = std::unique_ptr<T, Free>;

std::vector<Owned<X509>> ReadCertificates(const std::string& pem) {
  std::vector<Owned<X509>> certs;
  Owned<BIO> bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  while (bio) {
    Owned<X509> cert(PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr));
    if (!cert) break;
    certs.push_back(std::move(cert));
  }
  ERR_clear_error();  // the end of the file reads as an error
  return certs;
}

bool IsIpAddress(const std::string& host) {
  return !host.empty() && (host.find(':') != std::string::npos ||
                           host.find_first_not_of("0123456789.") == std::string::npos);
}

}  // namespace

Status CheckServerCertificate(const ChannelSecurity& security, const std::string& host, std::string* warning) {
  warning->clear();
  std::vector<Owned<X509>> cas = ReadCertificates(security.ca_pem);
  if (cas.empty()) {
    return Status::InvalidArgument("--tls_ca_file: no readable certificate in it");
  }
  std::vector<Owned<X509>> chain = ReadCertificates(security.cert_pem);
  if (chain.empty()) {
    return Status::InvalidArgument("--tls_cert_file: no readable certificate in it");
  }
  X509* leaf = chain[0].get();
  Owned<BIO> key_bio(
      BIO_new_mem_buf(security.key_pem.data(), static_cast<int>(security.key_pem.size())));
  Owned<EVP_PKEY> key(PEM_read_bio_PrivateKey(key_bio.get(), nullptr, nullptr, nullptr));
  ERR_clear_error();
  if (!key) {
    return Status::InvalidArgument("--tls_key_file: no readable (unencrypted) private key in it");
  }
  if (X509_check_private_key(leaf, key.get()) != 1) {
    ERR_clear_error();
    return Status::InvalidArgument("--tls_cert_file and --tls_key_file do not belong together (the key is not the "
             "certificate's)");
  }

  Owned<X509_STORE> store(X509_STORE_new());
  for (auto& ca : cas) X509_STORE_add_cert(store.get(), ca.get());
  Owned<STACK_OF(X509)> intermediates(sk_X509_new_null());
  for (size_t i = 1; i < chain.size(); ++i) {
    X509_up_ref(chain[i].get());
    sk_X509_push(intermediates.get(), chain[i].get());
  }
  Owned<X509_STORE_CTX> ctx(X509_STORE_CTX_new());
  X509_STORE_CTX_init(ctx.get(), store.get(), leaf, intermediates.get());
  // The certificate serves clients and is presented to peers as a client.
  for (int purpose : {X509_PURPOSE_SSL_SERVER, X509_PURPOSE_SSL_CLIENT}) {
    X509_STORE_CTX_set_purpose(ctx.get(), purpose);
    if (X509_verify_cert(ctx.get()) != 1) {
      const int code = X509_STORE_CTX_get_error(ctx.get());
      ERR_clear_error();
      return Status::InvalidArgument(std::string("--tls_cert_file does not verify against --tls_ca_file as a TLS ") +
               (purpose == X509_PURPOSE_SSL_SERVER ? "server" : "client") +
               " certificate: " + X509_verify_cert_error_string(code) +
               " (members serve it and present it to their peers: it needs extended key usages "
               "serverAuth and clientAuth; scripts/gen-certs.sh makes such certificates)");
    }
    X509_STORE_CTX_cleanup(ctx.get());
    X509_STORE_CTX_init(ctx.get(), store.get(), leaf, intermediates.get());
  }

  const std::string name = security.server_name.empty() ? host : security.server_name;
  const bool ip = security.server_name.empty() && IsIpAddress(name);
  const int match = ip ? X509_check_ip_asc(leaf, name.c_str(), 0)
                       : X509_check_host(leaf, name.c_str(), name.size(), 0, nullptr);
  ERR_clear_error();
  if (match != 1) {
    return Status::InvalidArgument("--tls_cert_file does not name " + std::string(ip ? "IP address " : "host ") + name +
             (security.server_name.empty()
                  ? " (this member's address in the cluster file, which clients and peers dial)"
                  : " (--tls_server_name)") +
             ": add it as a subject alternative name (scripts/gen-certs.sh NAME=" +
             (ip ? "IP:" : "DNS:") + name + ")");
  }

  const ASN1_TIME* not_after = X509_get0_notAfter(leaf);
  int days = 0, seconds = 0;
  if (ASN1_TIME_diff(&days, &seconds, nullptr, not_after) == 1 && days < 30) {
    *warning = "--tls_cert_file expires in " + std::to_string(days) + " days";
  }
  return Status::OK();
}

}  // namespace raftkv
