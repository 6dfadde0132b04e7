// util/sha256.h against the FIPS 180-2 test vectors, fed whole and in uneven pieces.
#include <gtest/gtest.h>

#include <string>

#include "util/sha256.h"

namespace qinfer {
namespace {

std::string sha256_of(const std::string& text, size_t piece) {
  Sha256 hash;
  for (size_t i = 0; i < text.size(); i += piece) hash.update(text.data() + i, std::min(piece, text.size() - i));
  return hash.hex_digest();
}

TEST(Sha256, MatchesTheStandardVectors) {
  EXPECT_EQ(sha256_of("", 1), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_of("abc", 1), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  const std::string two_blocks = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
  for (size_t piece : {1, 7, 64, 1000})
    EXPECT_EQ(sha256_of(two_blocks, piece), "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(sha256_of(std::string(1000000, 'a'), 4096),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

}  // namespace
}  // namespace qinfer
