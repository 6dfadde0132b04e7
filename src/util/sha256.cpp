#include "util/sha256.h"

#include <gcrypt.h>

#include "util/error.h"

namespace qinfer {

namespace {

// libgcrypt must be initialised once before use; a function-local static makes that thread-safe.
void ensure_gcrypt_initialised() {
  static const bool initialised = [] {
    QINFER_CHECK(gcry_check_version(GCRYPT_VERSION) != nullptr, "libgcrypt older than its headers");
    gcry_control(GCRYCTL_DISABLE_SECMEM, 0);
    gcry_control(GCRYCTL_INITIALIZATION_FINISHED, 0);
    return true;
  }();
  (void)initialised;
}

}  // namespace

Sha256::Sha256() {
  ensure_gcrypt_initialised();
  gcry_md_hd_t handle = nullptr;
  QINFER_CHECK(gcry_md_open(&handle, GCRY_MD_SHA256, 0) == 0, "gcry_md_open(SHA256) failed");
  handle_ = handle;
}

Sha256::~Sha256() { gcry_md_close(static_cast<gcry_md_hd_t>(handle_)); }

void Sha256::update(const void* data, size_t size) { gcry_md_write(static_cast<gcry_md_hd_t>(handle_), data, size); }

std::string Sha256::hex_digest() {
  const unsigned char* digest = gcry_md_read(static_cast<gcry_md_hd_t>(handle_), GCRY_MD_SHA256);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned i = 0; i < gcry_md_get_algo_dlen(GCRY_MD_SHA256); ++i) {
    out += kHex[digest[i] >> 4];
    out += kHex[digest[i] & 15];
  }
  return out;
}

}  // namespace qinfer
