// Checks the header of a classic-format netCDF file before netCDF-C opens it.
#pragma once

#include <string>

namespace sparsenet::io {

// When `path` starts with the magic of a classic-format netCDF file ("CDF" and version byte 1, 2
// or 5: CDF-1 classic, CDF-2 64-bit offset, CDF-5 64-bit data), parses its whole header and
// checks it against the file format specification and against everything netCDF-C 4.9.0's
// header reader (libsrc/v1hpg.c) trusts: every count, length and name within the bytes the file
// has, types valid for the version, dimension ids in range, at most one unlimited dimension and
// only as a variable's first, no duplicate names, vsize and begin consistent with the shapes,
// every variable's data (numrecs records of the record variables) within the file. netCDF-C
// allocates what a header claims and indexes with it before checking it, and crashes on corrupt
// headers (docs/reliability.md, "Fuzzing", finding 4). Throws Error(kIo) "<path>: corrupt netCDF
// header: <what> (byte <offset>)". Accepts every file netCDF-C writes in those formats.
// Returns without a verdict for anything else (an HDF5-based netCDF-4 file, other magic, a file
// of under 4 bytes or one that cannot be opened): nc_open reports those as before.
void check_netcdf_header(const std::string& path);

}  // namespace sparsenet::io
