// tools/io/input_file.h: plain and xz inputs read the same bytes; every way an xz file can be
// damaged (truncated, corrupt, a dictionary past the decoder's memory limit) is an error naming
// the file, never a silently shorter input. Also `mlasim plan --check-golden` on .xz corpora.
#include "tools/io/input_file.h"

#include <gtest/gtest.h>
#include <lzma.h>
#include <unistd.h>
#include <zlib.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "tools/mlasim/cli.h"

namespace mlasim::io {
namespace {

namespace fs = std::filesystem;

class TempDir {
 public:
  TempDir() {
    path_ = fs::temp_directory_path() /
            ("mlasim_input_file_test_" + std::to_string(::getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  std::string Write(const std::string& name, const std::string& bytes) const {
    const fs::path p = path_ / name;
    std::ofstream(p, std::ios::binary) << bytes;
    return p.string();
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

// One xz stream (preset 1: fast; CRC64) holding `text`.
std::string Xz(const std::string& text) {
  std::vector<uint8_t> out(lzma_stream_buffer_bound(text.size()));
  size_t out_pos = 0;
  const lzma_ret r = lzma_easy_buffer_encode(6, LZMA_CHECK_CRC64, nullptr,
                                             reinterpret_cast<const uint8_t*>(text.data()),
                                             text.size(), out.data(), &out_pos, out.size());
  EXPECT_EQ(r, LZMA_OK);
  return std::string(reinterpret_cast<const char*>(out.data()), out_pos);
}

// `text` as gzip writes it (zlib's deflate with the gzip wrapper).
std::string Gzip(const std::string& text) {
  z_stream z{};
  EXPECT_EQ(deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY), Z_OK);
  std::string out(deflateBound(&z, text.size()), '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
  z.avail_in = static_cast<uInt>(text.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&z, Z_FINISH), Z_STREAM_END);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

struct ReadResult {
  std::string bytes;
  Status status;
  bool compressed = false;
};

ReadResult ReadAll(const std::string& path) {
  ReadResult r;
  auto in = InputFile::Open(path);
  if (!in.ok()) {
    r.status = in.status();
    return r;
  }
  r.bytes.assign(std::istreambuf_iterator<char>((*in)->stream()), {});
  r.status = (*in)->status();
  r.compressed = (*in)->compressed();
  return r;
}

// A multi-line text larger than the decoder's 256 KiB output buffer.
std::string BigText() {
  std::string s;
  for (int i = 0; i < 10000; ++i) s += "{\"id\": " + std::to_string(i) + ", \"x\": [1, 2, 3]}\n";
  return s;
}

TEST(InputFile, PlainFileReadsAsIs) {
  TempDir tmp;
  const std::string text = "line 1\nline 2\n";
  const ReadResult r = ReadAll(tmp.Write("plain.jsonl", text));
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(r.bytes, text);
  EXPECT_FALSE(r.compressed);
}

TEST(InputFile, EmptyFileIsEmptyNotAnError) {
  TempDir tmp;
  const ReadResult r = ReadAll(tmp.Write("empty.jsonl", ""));
  ASSERT_TRUE(r.status.ok());
  EXPECT_EQ(r.bytes, "");
}

TEST(InputFile, XzIsRecognisedByItsMagicNotItsName) {
  TempDir tmp;
  const std::string text = BigText();
  ASSERT_GT(text.size(), 256u * 1024);  // more than one output buffer of the decoder
  for (const char* name : {"corpus.jsonl.xz", "corpus.jsonl"}) {
    const ReadResult r = ReadAll(tmp.Write(name, Xz(text)));
    ASSERT_TRUE(r.status.ok()) << name << ": " << r.status.ToString();
    EXPECT_TRUE(r.compressed) << name;
    EXPECT_EQ(r.bytes, text) << name;
  }
  // Five bytes of the six-byte magic are not xz: read as plain text.
  const ReadResult r = ReadAll(tmp.Write("short", Xz(text).substr(0, 5)));
  ASSERT_TRUE(r.status.ok());
  EXPECT_FALSE(r.compressed);
}

// A gzip corpus is refused naming its compression, whatever its name: it was read as text and
// reported as malformed JSON on line 1. (zlib is no dependency of mlasim's libraries.)
TEST(InputFile, GzipIsRefusedNamingItsCompression) {
  TempDir tmp;
  for (const char* name : {"corpus.jsonl.gz", "corpus.jsonl"}) {
    const std::string path = tmp.Write(name, Gzip(BigText()));
    const ReadResult r = ReadAll(path);
    EXPECT_EQ(r.status.ToString(),
              path +
                  ": gzip-compressed; decompress it or compress it with xz (plain and .xz files "
                  "are read)");
  }
  // One byte of the two-byte magic is not gzip: read as plain text.
  const ReadResult r = ReadAll(tmp.Write("short", Gzip("x").substr(0, 1)));
  EXPECT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_FALSE(r.compressed);
  EXPECT_EQ(r.bytes.size(), 1u);
}

TEST(InputFile, ConcatenatedXzStreamsAreAllRead) {
  TempDir tmp;
  const ReadResult r = ReadAll(tmp.Write("two.xz", Xz("first\n") + Xz("second\n")));
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_EQ(r.bytes, "first\nsecond\n");
}

TEST(InputFile, TruncatedXzIsAnErrorNamingTheFile) {
  TempDir tmp;
  const std::string xz = Xz(BigText());
  // 6 bytes: the magic alone (shorter is not recognisable as xz and reads as plain text).
  for (size_t cut : {size_t{6}, size_t{12}, xz.size() / 2, xz.size() - 7}) {
    const std::string path = tmp.Write("cut.xz", xz.substr(0, cut));
    const ReadResult r = ReadAll(path);
    ASSERT_FALSE(r.status.ok()) << "cut at " << cut;
    EXPECT_EQ(r.status.field(), path);
    EXPECT_NE(r.status.message().find("xz"), std::string::npos) << r.status.message();
  }
  const ReadResult r = ReadAll(tmp.Write("cut.xz", xz.substr(0, xz.size() / 2)));
  EXPECT_EQ(r.status.message().rfind("truncated xz data", 0), 0u) << r.status.message();
}

TEST(InputFile, CorruptXzIsAnError) {
  TempDir tmp;
  std::string xz = Xz(BigText());
  xz[xz.size() / 2] = static_cast<char>(xz[xz.size() / 2] ^ 0x55);
  const std::string path = tmp.Write("bad.xz", xz);
  const ReadResult r = ReadAll(path);
  ASSERT_FALSE(r.status.ok());
  EXPECT_EQ(r.status.field(), path);
  EXPECT_EQ(r.status.message(), "corrupt xz data");
}

// Rewrites the LZMA2 dictionary-size byte of the first block header to `dict_code` (dictionary
// (2 | code & 1) << (code / 2 + 11) bytes) and fixes the header's CRC32 (xz file format 1.1.0,
// sections 3.1 and 5.3.1).
std::string WithDictionaryCode(std::string xz, uint8_t dict_code) {
  size_t pos = 12;  // the stream header
  const size_t header_size = (static_cast<uint8_t>(xz[pos]) + 1) * 4;
  const uint8_t flags = static_cast<uint8_t>(xz[pos + 1]);
  size_t p = pos + 2;
  auto skip_varint = [&] {
    while (static_cast<uint8_t>(xz[p++]) & 0x80) {
    }
  };
  if (flags & 0x40) skip_varint();                // compressed size
  if (flags & 0x80) skip_varint();                // uncompressed size
  EXPECT_EQ(static_cast<uint8_t>(xz[p]), 0x21);   // LZMA2 filter id
  EXPECT_EQ(static_cast<uint8_t>(xz[p + 1]), 1);  // one property byte
  xz[p + 2] = static_cast<char>(dict_code);
  const uint32_t crc =
      lzma_crc32(reinterpret_cast<const uint8_t*>(xz.data()) + pos, header_size - 4, 0);
  for (int i = 0; i < 4; ++i) xz[pos + header_size - 4 + i] = static_cast<char>(crc >> (8 * i));
  return xz;
}

TEST(InputFile, XzNeedingMoreThanTheDecoderLimitIsRefused) {
  TempDir tmp;
  const std::string xz = Xz("small\n");
  // Code 20: 1 MiB dictionary, decodes; code 40: 3 GiB, beyond kMaxXzDecoderBytes.
  const ReadResult fine = ReadAll(tmp.Write("1mib.xz", WithDictionaryCode(xz, 20)));
  ASSERT_TRUE(fine.status.ok()) << fine.status.ToString();
  EXPECT_EQ(fine.bytes, "small\n");
  const std::string path = tmp.Write("3gib.xz", WithDictionaryCode(xz, 40));
  const ReadResult r = ReadAll(path);
  ASSERT_FALSE(r.status.ok());
  EXPECT_EQ(r.status.field(), path);
  EXPECT_NE(r.status.message().find("needs more than 128 MiB"), std::string::npos)
      << r.status.message();
}

TEST(InputFile, MissingFileAndDirectoryAreErrors) {
  TempDir tmp;
  const std::string missing = (tmp.path() / "nope.xz").string();
  auto a = InputFile::Open(missing);
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().field(), missing);
  EXPECT_EQ(a.status().message(), "does not exist");
  auto b = InputFile::Open(tmp.path().string());
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().message(), "is a directory, not a file");
}

// --check-golden reads .xz corpora, and a damaged one exits 2 instead of checking fewer records.
TEST(InputFile, CheckGoldenReadsXzAndRefusesATruncatedOne) {
  TempDir tmp;
  std::vector<std::string> lines;
  {
    auto in = InputFile::Open(std::string(MLASIM_GOLDEN_DIR) + "/aiter-v12-dev.jsonl.xz");
    ASSERT_TRUE(in.ok()) << in.status().ToString();
    std::string line;
    while (lines.size() < 3 && std::getline((*in)->stream(), line)) lines.push_back(line);
  }
  ASSERT_EQ(lines.size(), 3u);
  const std::string xz = Xz(lines[0] + "\n" + lines[1] + "\n" + lines[2] + "\n");
  const std::string good = tmp.Write("three.jsonl.xz", xz);
  std::ostringstream out, err;
  EXPECT_EQ(cli::RunMlasim({"plan", "--check-golden", good}, out, err), 0) << err.str();
  EXPECT_EQ(out.str(), "3/3 records match in " + good + "\n");
  const std::string cut = tmp.Write("cut.jsonl.xz", xz.substr(0, xz.size() - 20));
  std::ostringstream out2, err2;
  EXPECT_EQ(cli::RunMlasim({"plan", "--check-golden", cut}, out2, err2), 2);
  EXPECT_NE(err2.str().find("truncated xz data"), std::string::npos) << err2.str();
}

}  // namespace
}  // namespace mlasim::io
