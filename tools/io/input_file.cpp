#include "tools/io/input_file.h"

#include <lzma.h>

#include <array>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <streambuf>

#include "sim/json_input.h"
#include "sim/os_error.h"

namespace mlasim::io {
namespace {

// "gzip", "xz", "zstd", "bzip2" or nullptr (sim::CompressionOf) for the first bytes of `f`,
// rewound after.
const char* CompressionOfFile(std::ifstream& f) {
  char head[8] = {};
  f.read(head, sizeof(head));
  const char* z = sim::CompressionOf(std::string_view(head, static_cast<size_t>(f.gcount())));
  f.clear();
  f.seekg(0);
  return z;
}

std::string LzmaReason(lzma_ret r) {
  switch (r) {
    case LZMA_MEM_ERROR: return "out of memory in the xz decoder";
    case LZMA_MEMLIMIT_ERROR:
      return "the xz stream needs more than " + std::to_string(kMaxXzDecoderBytes >> 20) +
             " MiB to decode (compress with xz -6 or lower)";
    case LZMA_FORMAT_ERROR: return "not an xz stream";
    case LZMA_OPTIONS_ERROR: return "unsupported xz options";
    case LZMA_DATA_ERROR: return "corrupt xz data";
    case LZMA_BUF_ERROR: return "truncated xz data (the stream ends before its end marker)";
    default: return "xz decoder error " + std::to_string(static_cast<int>(r));
  }
}

// A read-only streambuf that inflates an xz file (all concatenated streams) chunk by chunk.
class XzStreamBuf : public std::streambuf {
 public:
  XzStreamBuf(std::ifstream file, std::string path) : file_(std::move(file)), path_(path) {}
  ~XzStreamBuf() override { lzma_end(&strm_); }

  Status Init() {
    const lzma_ret r = lzma_stream_decoder(&strm_, kMaxXzDecoderBytes, LZMA_CONCATENATED);
    if (r != LZMA_OK) return InvalidArgumentError(path_, LzmaReason(r));
    return OkStatus();
  }
  const Status& status() const { return status_; }

 protected:
  int_type underflow() override {
    if (gptr() < egptr()) return traits_type::to_int_type(*gptr());
    while (!done_) {
      if (strm_.avail_in == 0 && !file_eof_) Refill();
      strm_.next_out = reinterpret_cast<uint8_t*>(out_.data());
      strm_.avail_out = out_.size();
      const lzma_ret r = lzma_code(&strm_, file_eof_ ? LZMA_FINISH : LZMA_RUN);
      const size_t produced = out_.size() - strm_.avail_out;
      if (r == LZMA_STREAM_END) {
        done_ = true;
      } else if (r != LZMA_OK) {
        Fail(LzmaReason(r));
      }
      if (produced > 0) {
        setg(out_.data(), out_.data(), out_.data() + produced);
        return traits_type::to_int_type(*gptr());
      }
    }
    return traits_type::eof();
  }

 private:
  void Refill() {
    file_.read(reinterpret_cast<char*>(in_.data()), in_.size());
    strm_.next_in = in_.data();
    strm_.avail_in = static_cast<size_t>(file_.gcount());
    if (file_.bad()) Fail("read error");
    if (file_.eof()) file_eof_ = true;
  }
  void Fail(const std::string& reason) {
    if (status_.ok()) status_ = InvalidArgumentError(path_, reason);
    done_ = true;
  }

  std::ifstream file_;
  std::string path_;
  lzma_stream strm_ = LZMA_STREAM_INIT;
  std::array<uint8_t, 64 * 1024> in_{};
  std::array<char, 256 * 1024> out_{};
  bool file_eof_ = false;
  bool done_ = false;
  Status status_;
};

class PlainInput : public InputFile {
 public:
  explicit PlainInput(std::ifstream f) : file_(std::move(f)) {}
  std::istream& stream() override { return file_; }
  Status status() const override { return OkStatus(); }
  bool compressed() const override { return false; }

 private:
  std::ifstream file_;
};

class XzInput : public InputFile {
 public:
  XzInput(std::ifstream f, const std::string& path) : buf_(std::move(f), path), stream_(&buf_) {}
  Status Init() { return buf_.Init(); }
  std::istream& stream() override { return stream_; }
  Status status() const override { return buf_.status(); }
  bool compressed() const override { return true; }

 private:
  XzStreamBuf buf_;
  std::istream stream_;
};

}  // namespace

StatusOr<std::unique_ptr<InputFile>> InputFile::Open(const std::string& path) {
  // Missing, unreadable, a directory or a pipe: the cause in words (sim/os_error.h).
  MLASIM_RETURN_IF_ERROR(sim::CheckReadableFile(path, path));
  std::ifstream f(path, std::ios::binary);
  if (!f) return sim::OsError(path, sim::FileOp::kRead, path, sim::OpenForReadErrno(path));
  const char* z = CompressionOfFile(f);
  if (z == nullptr) return std::unique_ptr<InputFile>(new PlainInput(std::move(f)));
  if (std::string(z) != "xz")  // gzip, zstd, bzip2: no dependency of mlasim's libraries
    return InvalidArgumentError(path, std::string(z) +
                                          "-compressed; decompress it or compress it with xz "
                                          "(plain and .xz files are read)");
  auto xz = std::make_unique<XzInput>(std::move(f), path);
  MLASIM_RETURN_IF_ERROR(xz->Init());
  return std::unique_ptr<InputFile>(std::move(xz));
}

}  // namespace mlasim::io
