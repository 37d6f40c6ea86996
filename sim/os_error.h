// File: sim/os_error.h
//
// Errors of the operating system in words: why a file could not be read or written, or a folder
// created or listed, naming the cause and the path that has it ("out/x.json: the folder out does
// not exist", "ro is on a read-only file system", "a/b is not a directory"), never a bare
// "cannot open". Every read and write of the `mlasim` CLI goes through these (docs/cli.md,
// "Files that cannot be read or written"). Errors are InvalidArgument: exit 2.
//
// The cause comes from the errno of the failed call; where the errno alone does not say which
// part of the path is at fault (ENOENT: which folder is missing; ENOTDIR: which component is a
// file; EROFS / EACCES: which folder), the path's components are looked at (lstat / stat) when
// the message is made. A folder that exists and still refuses a new entry (ENOENT from /proc,
// EPERM from /sys: the file system's rule, not a missing folder or the permission bits) is said
// so: "the folder /proc does not allow creating folders in it (its file system refused: No such
// file or directory)".
#pragma once

#include <cstdint>
#include <string>
#include <system_error>

#include "ref/status.h"

namespace mlasim::sim {

// What was being done when the call failed: it picks the verb of the message.
enum class FileOp : uint8_t {
  kRead,          // open or read a file
  kWrite,         // create, open, write or rename a file
  kCreateFolder,  // create a folder (and its missing parents)
  kWriteIn,       // write files into an existing folder (`path` is the folder)
  kListFolder,    // list a folder's entries
  kLoadLibrary,   // dlopen a shared library (the file part of it)
};

// One sentence naming the cause and the path, for a message whose field is a flag or a JSON
// path: "x.json does not exist", "permission denied reading x.json", "cannot write out/r.xml:
// the folder out does not exist", "cannot write f: ro is on a read-only file system",
// "cannot read a/b/c: a/b is not a directory", "x is a directory, not a file", "cannot write
// /dev/full: no space left on the device (the disk is full)". `err` is an errno value; 0 (the
// caller could not learn it) gives "cannot <verb> PATH".
std::string OsErrorText(FileOp op, const std::string& path, int err);

// The same without the leading path, for a message whose field is already the path: "does not
// exist", "permission denied reading it", "cannot write it: the folder out does not exist".
std::string OsErrorReason(FileOp op, const std::string& path, int err);

// InvalidArgument(field, OsErrorText(op, path, err)); OsErrorReason when `field` is `path` (a
// message "x.json: does not exist", not "x.json: x.json does not exist").
Status OsError(const std::string& field, FileOp op, const std::string& path, int err);

// Same from a std::filesystem error code (its value is an errno in the generic and system
// categories, the only ones libstdc++ uses on Linux).
Status OsError(const std::string& field, FileOp op, const std::string& path,
               const std::error_code& ec);

// The errno that open(2) of `path` for reading gives now, 0 when it opens (it is closed again).
// For callers whose failed open (std::ifstream) did not keep errno.
int OpenForReadErrno(const std::string& path);

// OK when `path` names a file that can be opened for reading: not missing, not a directory, not
// a pipe or socket (which may never end). Errors: InvalidArgument(field, OsErrorText(...)).
Status CheckReadableFile(const std::string& field, const std::string& path);

// OK when `path` can be written: not a directory, and it can be opened for writing (a missing
// file is created and removed again, an existing one is left as it is): checked before a command
// does its work, so a bad path costs nothing and a failed command leaves no empty file.
// Errors: InvalidArgument(field) naming the cause.
Status CheckOutputFile(const std::string& field, const std::string& path);

// Writes `text` to `path` (created, or truncated), with write(2) until every byte is written.
// Errors: InvalidArgument(field) naming the cause (a missing folder, a read-only file system, a
// full disk: /dev/full gives ENOSPC).
Status WriteTextFile(const std::string& field, const std::string& path, const std::string& text);

// Prepares a folder that a command writes files into: creates it and its missing parents when
// `create` (else it must exist), checks it is a directory, and proves files can be written in it
// (a probe file, removed again), so a read-only or full folder is refused before any work.
// Errors: InvalidArgument(field) naming the cause ("ro is on a read-only file system", "the
// folder out does not exist", "a/b is not a directory").
Status PrepareOutputFolder(const std::string& field, const std::string& dir, bool create);

// Writes all of `text` to the file descriptor `fd`, retrying short writes and EINTR: 0, or the
// errno of the failed write (EIO for a write that wrote nothing).
int WriteAll(int fd, const std::string& text);

}  // namespace mlasim::sim
