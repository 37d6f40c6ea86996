// File: sim/os_error.cpp — errors of the operating system in words (sim/os_error.h).
#include "sim/os_error.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

#include <fmt/format.h>

namespace mlasim::sim {
namespace {

namespace fs = std::filesystem;

struct Words {
  const char* verb;    // "cannot <verb> PATH"
  const char* gerund;  // "permission denied <gerund> PATH"
};

Words WordsOf(FileOp op) {
  switch (op) {
    case FileOp::kRead: return {"read", "reading"};
    case FileOp::kWrite: return {"write", "writing"};
    case FileOp::kCreateFolder: return {"create the folder", "creating the folder"};
    case FileOp::kWriteIn: return {"write files in", "writing files in"};
    case FileOp::kListFolder: return {"list the folder", "listing the folder"};
    case FileOp::kLoadLibrary: return {"load", "loading"};
  }
  return {"use", "using"};
}

bool Writes(FileOp op) {
  return op == FileOp::kWrite || op == FileOp::kCreateFolder || op == FileOp::kWriteIn;
}

// The leading parts of `path`: "a/b/c" -> "a", "a/b", "a/b/c"; "/x/y" -> "/x", "/x/y".
std::vector<std::string> Prefixes(const std::string& path) {
  std::vector<std::string> out;
  fs::path p;
  for (const fs::path& part : fs::path(path)) {
    p /= part;
    if (part == "/" || part.empty()) continue;
    out.push_back(p.string());
  }
  return out;
}

bool Exists(const std::string& p) {
  struct stat st;
  return ::lstat(p.c_str(), &st) == 0;
}

bool IsDirectory(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

// The first leading part of `path` that does not exist, or "".
std::string FirstMissing(const std::string& path) {
  for (const std::string& p : Prefixes(path)) {
    struct stat st;
    if (::lstat(p.c_str(), &st) != 0) return errno == ENOENT ? p : std::string();
  }
  return "";
}

// The first leading part of `path` that exists and is not a directory (the whole path
// included), or "".
std::string FirstNotDirectory(const std::string& path) {
  for (const std::string& p : Prefixes(path)) {
    struct stat st;
    if (::stat(p.c_str(), &st) != 0) return "";
    if (!S_ISDIR(st.st_mode)) return p;
  }
  return "";
}

// The folder a new entry `path` would go in: its nearest existing ancestor ("." for a bare
// relative name).
std::string NearestFolder(const std::string& path) {
  fs::path p = fs::path(path).parent_path();
  while (!p.empty() && !IsDirectory(p.string())) p = p.parent_path();
  return p.empty() ? (fs::path(path).is_absolute() ? "/" : ".") : p.string();
}

// The message in both forms: `full` begins with the path, `reason` leaves it to the field.
struct Text {
  std::string full, reason;
};

// "PATH <tail>" / "<tail>".
Text Led(const std::string& path, const std::string& tail) {
  return {path + " " + tail, tail};
}

// "cannot <verb> PATH: <cause>" / "cannot <verb> it: <cause>".
Text Cannot(FileOp op, const std::string& path, const std::string& cause) {
  const std::string verb = WordsOf(op).verb;
  return {"cannot " + verb + " " + path + ": " + cause, "cannot " + verb + " it: " + cause};
}

Text Denied(FileOp op, const std::string& path) {
  const std::string gerund = WordsOf(op).gerund;
  return {"permission denied " + gerund + " " + path, "permission denied " + gerund + " it"};
}

// The folder `dir` exists but its file system refused a new entry in it (`err`: ENOENT from
// /proc, EPERM from /sys, ...): said in words, the system's own words after them.
Text RefusedIn(FileOp op, const std::string& path, const std::string& dir, int err) {
  const char* what = op == FileOp::kCreateFolder ? "folders" : "files";
  const bool itself = dir == path;  // kWriteIn: "cannot write files in /proc: the folder ..."
  return Cannot(op, path,
                fmt::format("{} does not allow creating {}{} (its file system refused: {})",
                            itself ? "the folder" : "the folder " + dir, what,
                            itself ? "" : " in it", std::strerror(err)));
}

// The parent of `p` ("." for a bare relative name, "/" for a top-level entry).
std::string ParentOf(const std::string& p) {
  const fs::path parent = fs::path(p).parent_path();
  return parent.empty() ? "." : parent.string();
}

// ENOENT. A read, or files in a folder: what is missing. A new file: the folder that is missing
// (a write creates no folder), or, when its folder exists, that folder refused it. A new folder
// (its missing parents are created too): the first missing part's existing parent refused it.
Text Missing(FileOp op, const std::string& path) {
  const std::string missing = FirstMissing(path);
  if (op == FileOp::kWriteIn && missing.empty() && IsDirectory(path))
    return RefusedIn(op, path, path, ENOENT);
  if (!Writes(op) || op == FileOp::kWriteIn) {
    if (missing.empty() || missing == path) return Led(path, "does not exist");
    return Led(path, "does not exist (there is no folder " + missing + ")");
  }
  const bool refused = !missing.empty() && IsDirectory(ParentOf(missing)) &&
                       (op == FileOp::kCreateFolder || missing == path);
  if (refused) return RefusedIn(op, path, ParentOf(missing), ENOENT);
  if (missing.empty() || missing == path) return Cannot(op, path, std::strerror(ENOENT));
  return Cannot(op, path, "the folder " + missing + " does not exist");
}

Text NotDirectory(FileOp op, const std::string& path, int err) {
  const std::string nd = FirstNotDirectory(path);
  if (nd == path) {
    return Led(
        path, op == FileOp::kCreateFolder ? "exists and is not a directory" : "is not a directory");
  }
  if (!nd.empty()) return Cannot(op, path, nd + " is not a directory");
  return Cannot(op, path, std::strerror(err));
}

Text PermissionDenied(FileOp op, const std::string& path) {
  switch (op) {
    case FileOp::kWrite:
      if (Exists(path)) return Denied(op, path);
      return Cannot(op, path,
                    "the folder " + NearestFolder(path) + " is not writable (permission denied)");
    case FileOp::kCreateFolder:
      return Cannot(op, path,
                    "the folder " + NearestFolder(path) + " is not writable (permission denied)");
    case FileOp::kWriteIn: return Led(path, "is not writable (permission denied)");
    default: return Denied(op, path);
  }
}

Text ReadOnly(FileOp op, const std::string& path) {
  const std::string where = op == FileOp::kWriteIn ? path : NearestFolder(path);
  return Cannot(op, path, where + " is on a read-only file system");
}

Text Describe(FileOp op, const std::string& path, int err) {
  switch (err) {
    case 0: {
      const std::string verb = WordsOf(op).verb;
      return {"cannot " + verb + " " + path, "cannot " + verb + " it"};
    }
    case ENOENT: return Missing(op, path);
    case EACCES: return PermissionDenied(op, path);
    case EPERM:  // not the permission bits: the file system or an attribute forbids it
      if (op == FileOp::kCreateFolder || (op == FileOp::kWrite && !Exists(path)))
        return RefusedIn(op, path, NearestFolder(path), EPERM);
      return PermissionDenied(op, path);
    case EROFS: return ReadOnly(op, path);
    case ENOSPC: return Cannot(op, path, "no space left on the device (the disk is full)");
#ifdef EDQUOT
    case EDQUOT: return Cannot(op, path, "the disk quota is exceeded");
#endif
    case EISDIR: return Led(path, "is a directory, not a file");
    case ENOTDIR:
    case EEXIST: return NotDirectory(op, path, err);
    case EIO:
      return Cannot(op, path, "an input/output error (a failing disk or network file system?)");
    case ELOOP: return Cannot(op, path, "too many levels of symbolic links (a link loop?)");
    case ENAMETOOLONG: return Cannot(op, path, "the name is too long");
    case EMFILE:
    case ENFILE: return Cannot(op, path, "too many open files");
    case EFBIG: return Cannot(op, path, "the file would be too large for its file system");
    default: return Cannot(op, path, std::strerror(err));
  }
}

}  // namespace

std::string OsErrorText(FileOp op, const std::string& path, int err) {
  return Describe(op, path, err).full;
}

std::string OsErrorReason(FileOp op, const std::string& path, int err) {
  return Describe(op, path, err).reason;
}

Status OsError(const std::string& field, FileOp op, const std::string& path, int err) {
  return InvalidArgumentError(
      field, field == path ? OsErrorReason(op, path, err) : OsErrorText(op, path, err));
}

Status OsError(const std::string& field, FileOp op, const std::string& path,
               const std::error_code& ec) {
  const bool errno_value =
      ec.category() == std::generic_category() || ec.category() == std::system_category();
  if (!errno_value) {
    const std::string head = field == path ? OsErrorReason(op, path, 0) : OsErrorText(op, path, 0);
    return InvalidArgumentError(field, head + ": " + ec.message());
  }
  return OsError(field, op, path, ec.value());
}

int OpenForReadErrno(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return errno;
  ::close(fd);
  return 0;
}

Status CheckReadableFile(const std::string& field, const std::string& path) {
  if (path.empty()) return InvalidArgumentError(field, "needs a file name");
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return OsError(field, FileOp::kRead, path, errno);
  if (S_ISDIR(st.st_mode)) return OsError(field, FileOp::kRead, path, EISDIR);
  if (S_ISFIFO(st.st_mode) || S_ISSOCK(st.st_mode))
    return InvalidArgumentError(field,
                                path + " is a pipe or socket, not a file (it may never end)");
  if (const int err = OpenForReadErrno(path); err != 0)
    return OsError(field, FileOp::kRead, path, err);
  return OkStatus();
}

Status CheckOutputFile(const std::string& field, const std::string& path) {
  if (path.empty()) return InvalidArgumentError(field, "needs a file name");
  if (IsDirectory(path)) return OsError(field, FileOp::kWrite, path, EISDIR);
  // O_EXCL tells whether this probe made the file: a probe leaves no empty file behind (a command
  // that fails after it writes nothing), and an existing file keeps its contents until the write.
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  const bool created = fd >= 0;
  if (!created && errno == EEXIST)
    fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  if (fd < 0) return OsError(field, FileOp::kWrite, path, errno);
  ::close(fd);
  if (created) ::unlink(path.c_str());
  return OkStatus();
}

int WriteAll(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return n < 0 ? errno : EIO;
    done += static_cast<size_t>(n);
  }
  return 0;
}

Status WriteTextFile(const std::string& field, const std::string& path, const std::string& text) {
  if (path.empty()) return InvalidArgumentError(field, "needs a file name");
  if (IsDirectory(path)) return OsError(field, FileOp::kWrite, path, EISDIR);
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return OsError(field, FileOp::kWrite, path, errno);
  int err = WriteAll(fd, text);
  if (::close(fd) != 0 && err == 0) err = errno;
  if (err != 0) return OsError(field, FileOp::kWrite, path, err);
  return OkStatus();
}

Status PrepareOutputFolder(const std::string& field, const std::string& dir, bool create) {
  if (dir.empty()) return InvalidArgumentError(field, "needs a folder name");
  if (create) {
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) return OsError(field, FileOp::kCreateFolder, dir, ec);
  }
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0) return OsError(field, FileOp::kWriteIn, dir, errno);
  if (!S_ISDIR(st.st_mode)) return OsError(field, FileOp::kWriteIn, dir, ENOTDIR);
  // A probe file, written and synced: a folder that takes no new file (read-only, not writable)
  // or no bytes (a full disk) is refused now. Unnamed where the file system allows (O_TMPFILE:
  // a kill leaves nothing), else a name unique to this process and call, removed again.
  static std::atomic<uint64_t> counter{0};
  std::string probe;
  int fd = -1;
#ifdef O_TMPFILE
  fd = ::open(dir.c_str(), O_TMPFILE | O_WRONLY | O_CLOEXEC, 0644);
  const bool unsupported = fd < 0 && (errno == EOPNOTSUPP || errno == EISDIR || errno == EINVAL);
#else
  const bool unsupported = true;
#endif
  if (fd < 0 && !unsupported) return OsError(field, FileOp::kWriteIn, dir, errno);
  if (fd < 0) {
    probe = (fs::path(dir) /
             (".mlasim-probe-" + std::to_string(::getpid()) + "-" + std::to_string(counter++)))
                .string();
    fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) return OsError(field, FileOp::kWriteIn, dir, errno);
  }
  int err = WriteAll(fd, "probe\n");
  if (err == 0 && ::fsync(fd) != 0) err = errno;
  if (::close(fd) != 0 && err == 0) err = errno;
  if (!probe.empty()) ::unlink(probe.c_str());
  if (err != 0) return OsError(field, FileOp::kWriteIn, dir, err);
  return OkStatus();
}

}  // namespace mlasim::sim
