// File: tools/io/npy_reader.h
//
// A strict reader for NumPy's .npy format (numpy/lib/format.py, "NPY format" versions 1.0, 2.0
// and 3.0): magic "\x93NUMPY", version, a little-endian header length, then an ASCII Python dict
// literal with exactly the keys 'descr', 'fortran_order' and 'shape', then the raw data.
//
// Why not xtensor's xt::load_npy (which mlasim uses to *write* .npy files): it allocates the
// header (up to 4 GiB for a version 2 file) and the data from unchecked header values before any
// check, reads a truncated file without noticing, requires the keys in one order and reports
// errors as exceptions. This reader checks every field against limits first, and reads the data
// only after the caller has compared the header with what it expects (a case manifest).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ref/status.h"

namespace mlasim::io {

// Bounds on what one .npy header may declare (issue 19: no allocation before a check).
struct NpyLimits {
  int64_t max_header_bytes = 65536;           // the dict literal; numpy writes < 200 bytes
  int32_t max_ndim = 8;                       // q [T, H, D] and paged KV [pages, page, 1, D] fit
  int64_t max_dim = int64_t{1} << 40;         // any one extent
  int64_t max_data_bytes = int64_t{1} << 62;  // prod(shape) * itemsize, before overflow
};

struct NpyHeader {
  int32_t major = 0, minor = 0;  // format version: 1.0, 2.0 or 3.0
  std::string descr;             // "<i4", "|u1", ... (byte order, kind, item size)
  int32_t itemsize = 0;          // bytes per element (the descr's digits)
  bool fortran_order = false;
  std::vector<int64_t> shape;  // () for a 0-d array
  int64_t data_offset = 0;     // bytes before the data: preamble + header
  int64_t data_bytes = 0;      // prod(shape) * itemsize
};

// Bytes of the preamble before the header dict: magic (6) + version (2) + length (2 or 4).
// `first12` holds the first 12 bytes of the file (fewer when the file is shorter). Returns the
// preamble size and sets *header_len. Errors (field `field`): a short file, bad magic, a version
// other than 1.0/2.0/3.0, a header longer than limits.max_header_bytes.
StatusOr<int64_t> ParseNpyPreamble(std::string_view first12, const std::string& field,
                                   const NpyLimits& limits, int64_t* header_len);

// Parses the header dict (the bytes after the preamble, `header_len` of them). Strict: the three
// keys exactly once each, in any order; 'descr' a type string [<>|=][biufcV]N with N in
// {1,2,4,8,16}; 'fortran_order' True or False; 'shape' a tuple of non-negative integers ("(4,)"
// for one dimension); only spaces and a final newline after the closing brace. Errors name
// `field` + ":header.<key>".
StatusOr<NpyHeader> ParseNpyHeaderDict(std::string_view dict, const std::string& field,
                                       const NpyLimits& limits);

// Preamble + dict of a whole in-memory file (tests, fuzzing). data_offset/data_bytes are set;
// the data itself is not compared with the file size here (see CheckNpyDataSize).
StatusOr<NpyHeader> ParseNpyHeader(std::string_view file_bytes, const std::string& field,
                                   const NpyLimits& limits = {});

// The file holds exactly the data the header declares: file_size == data_offset + data_bytes.
// Errors: "truncated: ..." or "N bytes after the data" (field `field`).
Status CheckNpyDataSize(const NpyHeader& header, int64_t file_size, const std::string& field);

// Item size of a type string ("<i4" -> 4), or 0 when it is not [<>|=][biufcV]N, N in 1,2,4,8,16.
int32_t NpyItemSize(std::string_view descr);

// "(4, 8)" / "(4,)" / "()": a shape as numpy prints it, for messages.
std::string NpyShapeString(const std::vector<int64_t>& shape);

}  // namespace mlasim::io
