// sim/os_error.h: every cause of a failed read or write gets its own words, each made real where
// this machine allows it. Tests run as root in CI, where permission bits do not stop a read or a
// write: the permission cases then run in a child process that gives up root (setuid to
// nobody), and the read-only file system in a child with a private mount namespace and a
// read-only tmpfs. Where neither is possible (no privilege to change user or to mount), the
// message is checked from the errno value alone (OsErrorText with EACCES / EROFS), and the test
// says so in its output.
#include "sim/os_error.h"

#include <fcntl.h>
#include <grp.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <optional>
#include <string>

#include "sim/json_input.h"

namespace mlasim::sim {
namespace {

namespace fs = std::filesystem;

class OsErrors : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("mlasim_os_error_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    fs::permissions(dir_, fs::perms::all);  // a child that gave up root can reach its files
  }
  void TearDown() override {
    std::error_code ec;
    fs::permissions(dir_, fs::perms::all, ec);
    for (auto it = fs::recursive_directory_iterator(dir_, ec);
         !ec && it != fs::recursive_directory_iterator(); it.increment(ec))
      fs::permissions(it->path(), fs::perms::owner_all, fs::perm_options::add, ec);
    fs::remove_all(dir_, ec);
  }
  std::string P(const std::string& rel) const { return (dir_ / rel).string(); }
  std::string Write(const std::string& rel, const std::string& text = "x") const {
    std::ofstream(dir_ / rel) << text;
    return P(rel);
  }
  fs::path dir_;
};

// Runs `fn` in a child process and returns the text it produced; nullopt when the child could
// not set itself up (`setup` returned false: no privilege to give up root or to mount).
std::optional<std::string> InChild(const std::function<bool()>& setup,
                                   const std::function<std::string()>& fn) {
  int fds[2];
  if (::pipe(fds) != 0) return std::nullopt;
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    const std::string text = setup() ? "1" + fn() : "0";
    (void)!::write(fds[1], text.data(), text.size());
    ::_exit(0);
  }
  ::close(fds[1]);
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) out.append(buf, n);
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (out.empty() || out[0] != '1') return std::nullopt;
  return out.substr(1);
}

// The child gives up root (uid and gid 65534, nobody), so permission bits apply to it.
bool DropRoot() {
  if (::geteuid() != 0) return true;
  return ::setgroups(0, nullptr) == 0 && ::setgid(65534) == 0 && ::setuid(65534) == 0;
}

// The child mounts a read-only tmpfs at `dir` in a private mount namespace.
std::function<bool()> ReadOnlyAt(const std::string& dir) {
  return [dir] {
    return ::unshare(CLONE_NEWNS) == 0 &&
           ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) == 0 &&
           ::mount("tmpfs", dir.c_str(), "tmpfs", MS_RDONLY, "size=64k") == 0;
  };
}

std::string Message(const Status& st) {
  return st.ok() ? "ok" : st.field() + ": " + st.message();
}

TEST_F(OsErrors, MissingFileSaysItDoesNotExist) {
  const std::string f = P("nope.json");
  EXPECT_EQ(Message(CheckReadableFile("--request", f)), "--request: " + f + " does not exist");
  auto text = ReadTextFile(f, "--request");
  EXPECT_EQ(Message(text.status()), "--request: " + f + " does not exist");
}

TEST_F(OsErrors, MissingFolderOfAnInputIsNamed) {
  const std::string f = P("no/deeper/x.json");
  EXPECT_EQ(Message(CheckReadableFile("--log", f)),
            "--log: " + f + " does not exist (there is no folder " + P("no") + ")");
}

TEST_F(OsErrors, FieldThatIsThePathGetsTheReasonAlone) {
  const std::string f = P("nope.json");
  EXPECT_EQ(Message(CheckReadableFile(f, f)), f + ": does not exist");
  EXPECT_EQ(OsErrorReason(FileOp::kWrite, P("no/x"), ENOENT),
            "cannot write it: the folder " + P("no") + " does not exist");
}

TEST_F(OsErrors, DirectoryWhereAFileIsExpected) {
  EXPECT_EQ(Message(CheckReadableFile("--layout", P(""))),
            "--layout: " + P("") + " is a directory, not a file");
  EXPECT_EQ(Message(WriteTextFile("--html", dir_.string(), "x")),
            "--html: " + dir_.string() + " is a directory, not a file");
  EXPECT_EQ(Message(CheckOutputFile("--junit", dir_.string())),
            "--junit: " + dir_.string() + " is a directory, not a file");
}

TEST_F(OsErrors, PathComponentThatIsAFileIsNotADirectory) {
  const std::string file = Write("afile");
  EXPECT_EQ(Message(CheckReadableFile("--contract", file + "/c.json")),
            "--contract: cannot read " + file + "/c.json: " + file + " is not a directory");
  EXPECT_EQ(Message(WriteTextFile("--svg", file + "/p.svg", "x")),
            "--svg: cannot write " + file + "/p.svg: " + file + " is not a directory");
  EXPECT_EQ(Message(PrepareOutputFolder("--out", file + "/sub", /*create=*/true)),
            "--out: cannot create the folder " + file + "/sub: " + file + " is not a directory");
  EXPECT_EQ(Message(PrepareOutputFolder("--out", file, /*create=*/true)),
            "--out: " + file + " exists and is not a directory");
  EXPECT_EQ(Message(PrepareOutputFolder("--out", file, /*create=*/false)),
            "--out: " + file + " is not a directory");
}

TEST_F(OsErrors, MissingOutputFolderIsNamed) {
  const std::string f = P("no/such/r.xml");
  EXPECT_EQ(Message(WriteTextFile("--junit", f, "x")),
            "--junit: cannot write " + f + ": the folder " + P("no") + " does not exist");
  EXPECT_EQ(Message(CheckOutputFile("--html", f)),
            "--html: cannot write " + f + ": the folder " + P("no") + " does not exist");
  EXPECT_EQ(Message(PrepareOutputFolder("--out", P("gone"), /*create=*/false)),
            "--out: " + P("gone") + " does not exist");
  EXPECT_FALSE(fs::exists(P("gone")));
}

TEST_F(OsErrors, FullDiskSaysSo) {
  if (!fs::exists("/dev/full")) GTEST_SKIP() << "no /dev/full on this system";
  EXPECT_EQ(Message(WriteTextFile("--layout-out", "/dev/full", "{}\n")),
            "--layout-out: cannot write /dev/full: no space left on the device (the disk is "
            "full)");
  // The words of the errno alone, for a full folder (ENOSPC while writing a file in it).
  EXPECT_EQ(OsErrorText(FileOp::kWriteIn, P(""), ENOSPC),
            "cannot write files in " + P("") + ": no space left on the device (the disk is full)");
}

TEST_F(OsErrors, UnreadableFileIsPermissionDenied) {
  const std::string f = Write("secret.json", "{}");
  ::chmod(f.c_str(), 0);
  const auto child = InChild(DropRoot, [&] { return Message(CheckReadableFile("--request", f)); });
  const std::string want = "--request: permission denied reading " + f;
  if (child) {
    EXPECT_EQ(*child, want);
  } else {  // no privilege to give up root here: the words from the errno value
    std::cout << "[ note ] EACCES checked from the errno value (cannot drop root here)\n";
    EXPECT_EQ("--request: " + OsErrorText(FileOp::kRead, f, EACCES), want);
  }
}

TEST_F(OsErrors, ReadOnlyFolderAndFileArePermissionDenied) {
  fs::create_directories(P("ro"));
  const std::string file = Write("ro/l.json");
  ::chmod(file.c_str(), 0444);
  ::chmod(P("ro").c_str(), 0555);
  const auto child = InChild(DropRoot, [&] {
    return Message(WriteTextFile("--layout-out", P("ro/new.json"), "x")) + "|" +
           Message(WriteTextFile("--layout-out", file, "x")) + "|" +
           Message(PrepareOutputFolder("--out", P("ro"), /*create=*/false)) + "|" +
           Message(PrepareOutputFolder("--out", P("ro/sub"), /*create=*/true));
  });
  const std::string want =
      "--layout-out: cannot write " + P("ro/new.json") + ": the folder " + P("ro") +
      " is not writable (permission denied)|--layout-out: permission denied writing " + file +
      "|--out: " + P("ro") + " is not writable (permission denied)|--out: cannot create the " +
      "folder " + P("ro/sub") + ": the folder " + P("ro") + " is not writable (permission denied)";
  if (child) {
    EXPECT_EQ(*child, want);
  } else {
    std::cout << "[ note ] EACCES on writes checked from the errno value (cannot drop root)\n";
    EXPECT_EQ(OsErrorText(FileOp::kWriteIn, P("ro"), EACCES),
              P("ro") + " is not writable (permission denied)");
    EXPECT_EQ(OsErrorText(FileOp::kWrite, file, EACCES), "permission denied writing " + file);
  }
}

TEST_F(OsErrors, ReadOnlyFileSystemSaysSo) {
  fs::create_directories(P("ro"));
  const auto child = InChild(ReadOnlyAt(P("ro")), [&] {
    return Message(PrepareOutputFolder("--out", P("ro"), /*create=*/false)) + "|" +
           Message(PrepareOutputFolder("--out", P("ro/findings"), /*create=*/true)) + "|" +
           Message(WriteTextFile("--scenario-out", P("ro/s.json"), "x"));
  });
  const std::string want = "--out: cannot write files in " + P("ro") + ": " + P("ro") +
                           " is on a read-only file system|--out: cannot create the folder " +
                           P("ro/findings") + ": " + P("ro") +
                           " is on a read-only file system|--scenario-out: cannot write " +
                           P("ro/s.json") + ": " + P("ro") + " is on a read-only file system";
  if (child) {
    EXPECT_EQ(*child, want);
  } else {  // no privilege to mount here: the words from the errno value
    std::cout << "[ note ] EROFS checked from the errno value (cannot mount here)\n";
    EXPECT_EQ(
        OsErrorText(FileOp::kWriteIn, P("ro"), EROFS),
        "cannot write files in " + P("ro") + ": " + P("ro") + " is on a read-only file system");
  }
}

TEST_F(OsErrors, FullFolderIsRefusedBeforeAnyWork) {
  fs::create_directories(P("full"));
  const std::string dir = P("full");
  const auto full = [dir] {                // a 64 KiB tmpfs, filled
    if (!ReadOnlyAt(dir)()) return false;  // (proves mounting works, then remounts below)
    if (::umount(dir.c_str()) != 0) return false;
    if (::mount("tmpfs", dir.c_str(), "tmpfs", 0, "size=64k") != 0) return false;
    const int fd = ::open((dir + "/fill").c_str(), O_WRONLY | O_CREAT, 0644);
    char block[4096] = {};
    while (::write(fd, block, sizeof block) > 0) {
    }
    ::close(fd);
    return true;
  };
  const auto child =
      InChild(full, [&] { return Message(PrepareOutputFolder("--out", dir, /*create=*/false)); });
  const std::string want =
      "--out: cannot write files in " + dir + ": no space left on the device (the disk is full)";
  if (child) {
    EXPECT_EQ(*child, want);
  } else {
    std::cout << "[ note ] ENOSPC in a folder checked from the errno value (cannot mount here)\n";
    EXPECT_EQ("--out: " + OsErrorText(FileOp::kWriteIn, dir, ENOSPC), want);
  }
}

// Round 9: a folder that exists and refuses a new entry all the same (/proc answers ENOENT, /sys
// EPERM) is named with the rule, not "No such file or directory" alone.
TEST_F(OsErrors, AFolderThatRefusesNewEntriesSaysSo) {
  const std::string d = dir_.string();
  const std::string enoent = std::strerror(ENOENT), eperm = std::strerror(EPERM);
  // From the errno values, on any machine.
  EXPECT_EQ(OsErrorText(FileOp::kCreateFolder, P("new"), ENOENT),
            "cannot create the folder " + P("new") + ": the folder " + d +
                " does not allow creating folders in it (its file system refused: " + enoent + ")");
  EXPECT_EQ(OsErrorText(FileOp::kCreateFolder, P("new/sub"), ENOENT),
            "cannot create the folder " + P("new/sub") + ": the folder " + d +
                " does not allow creating folders in it (its file system refused: " + enoent + ")");
  EXPECT_EQ(OsErrorText(FileOp::kWrite, P("r.html"), ENOENT),
            "cannot write " + P("r.html") + ": the folder " + d +
                " does not allow creating files in it (its file system refused: " + enoent + ")");
  EXPECT_EQ(OsErrorText(FileOp::kWriteIn, d, ENOENT),
            "cannot write files in " + d +
                ": the folder does not allow creating files (its file system refused: " + enoent +
                ")");
  EXPECT_EQ(OsErrorText(FileOp::kCreateFolder, P("new"), EPERM),
            "cannot create the folder " + P("new") + ": the folder " + d +
                " does not allow creating folders in it (its file system refused: " + eperm + ")");
  // Unchanged: a missing folder of a new file, a missing folder to write in, a file that exists.
  EXPECT_EQ(OsErrorText(FileOp::kWrite, P("no/r.html"), ENOENT),
            "cannot write " + P("no/r.html") + ": the folder " + P("no") + " does not exist");
  EXPECT_EQ(OsErrorText(FileOp::kWriteIn, P("gone"), ENOENT), P("gone") + " does not exist");
  const std::string f = Write("kept");
  EXPECT_EQ(OsErrorText(FileOp::kWrite, f, EPERM), "permission denied writing " + f);
  // The real thing, where /proc is mounted: it takes no new folder or file, with ENOENT.
  if (!fs::is_directory("/proc/self")) GTEST_SKIP() << "no /proc on this system";
  const std::string refused = " does not allow creating folders in it (its file system refused: ";
  EXPECT_EQ(
      Message(PrepareOutputFolder("--out", "/proc/mlasim-x", /*create=*/true)),
      "--out: cannot create the folder /proc/mlasim-x: the folder /proc" + refused + enoent + ")");
  EXPECT_EQ(Message(PrepareOutputFolder("--out", "/proc/mlasim-x/findings", /*create=*/true)),
            "--out: cannot create the folder /proc/mlasim-x/findings: the folder /proc" + refused +
                enoent + ")");
  EXPECT_EQ(Message(PrepareOutputFolder("--out", "/proc", /*create=*/true)),
            "--out: cannot write files in /proc: the folder does not allow creating files (its "
            "file system refused: " +
                enoent + ")");
  EXPECT_EQ(Message(WriteTextFile("--html", "/proc/mlasim-r.html", "x")),
            "--html: cannot write /proc/mlasim-r.html: the folder /proc does not allow creating "
            "files in it (its file system refused: " +
                enoent + ")");
}

TEST_F(OsErrors, EveryOtherCauseKeepsTheSystemWords) {
  const std::string f = P("x");
  EXPECT_EQ(OsErrorText(FileOp::kRead, f, 0), "cannot read " + f);
  EXPECT_EQ(
      OsErrorText(FileOp::kRead, f, EIO),
      "cannot read " + f + ": an input/output error (a failing disk or network file system?)");
  EXPECT_EQ(OsErrorText(FileOp::kRead, f, ELOOP),
            "cannot read " + f + ": too many levels of symbolic links (a link loop?)");
  EXPECT_EQ(OsErrorText(FileOp::kListFolder, f, EMFILE),
            "cannot list the folder " + f + ": too many open files");
  EXPECT_EQ(OsErrorText(FileOp::kWrite, f, EFBIG),
            "cannot write " + f + ": the file would be too large for its file system");
  EXPECT_EQ(OsErrorText(FileOp::kWrite, f, EDQUOT),
            "cannot write " + f + ": the disk quota is exceeded");
  EXPECT_EQ(OsErrorText(FileOp::kLoadLibrary, f, ETXTBSY),
            "cannot load " + f + ": " + std::strerror(ETXTBSY));
  EXPECT_EQ(OsErrorText(FileOp::kListFolder, f, EACCES),
            "permission denied listing the folder " + f);
}

TEST_F(OsErrors, FilesystemErrorCodesKeepTheirCause) {
  std::error_code ec;
  fs::create_directories(Write("afile") + "/sub", ec);
  ASSERT_TRUE(ec);
  EXPECT_EQ(Message(sim::OsError("--npy", FileOp::kCreateFolder, P("afile/sub"), ec)),
            "--npy: cannot create the folder " + P("afile/sub") + ": " + P("afile") +
                " is not a directory");
}

TEST_F(OsErrors, OutputFolderProbeLeavesNothingBehind) {
  ASSERT_TRUE(PrepareOutputFolder("--out", P("out/deep"), /*create=*/true).ok());
  EXPECT_TRUE(fs::is_directory(P("out/deep")));
  EXPECT_TRUE(fs::is_empty(P("out/deep")));
  EXPECT_EQ(Message(PrepareOutputFolder("--out", "", true)), "--out: needs a folder name");
  EXPECT_EQ(Message(WriteTextFile("--svg", "", "x")), "--svg: needs a file name");
}

TEST_F(OsErrors, WrittenFilesHoldEveryByte) {
  const std::string text(300000, 'z');  // more than one write(2) may take
  ASSERT_TRUE(WriteTextFile("--html", P("big.html"), text).ok());
  EXPECT_EQ(fs::file_size(P("big.html")), 300000u);
  ASSERT_TRUE(WriteTextFile("--html", P("big.html"), "ab").ok());  // truncated, not appended
  EXPECT_EQ(fs::file_size(P("big.html")), 2u);
  ASSERT_TRUE(CheckOutputFile("--html", P("big.html")).ok());  // leaves an existing file as is
  EXPECT_EQ(fs::file_size(P("big.html")), 2u);
}

}  // namespace
}  // namespace mlasim::sim

namespace mlasim::sim {
namespace {

// The output probe (CheckOutputFile) leaves nothing behind: a command that fails after it (mlasim
// check --scenario-out on a case it cannot turn into a scenario) left an empty file that replay
// then called malformed JSON. An existing file keeps its contents until the command writes.
class OutputProbe : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("mlasim_probe_" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::filesystem::path dir_;
};

TEST_F(OutputProbe, AMissingFileIsProbedWithoutBeingCreated) {
  const std::string path = (dir_ / "step.json").string();
  EXPECT_TRUE(CheckOutputFile("--scenario-out", path).ok());
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST_F(OutputProbe, AnExistingFileKeepsItsContents) {
  const std::string path = (dir_ / "step.json").string();
  std::ofstream(path) << "{\"old\": 1}";
  EXPECT_TRUE(CheckOutputFile("--scenario-out", path).ok());
  std::ifstream in(path);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, "{\"old\": 1}");
}

TEST_F(OutputProbe, AMissingFolderIsStillAnError) {
  const Status st = CheckOutputFile("--scenario-out", (dir_ / "no" / "step.json").string());
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.field(), "--scenario-out");
}

}  // namespace
}  // namespace mlasim::sim
