// netCDF helpers for the tests that write or damage files through the netCDF C API themselves.
#pragma once

#include <gtest/gtest.h>
#include <netcdf.h>

namespace sparsenet::testing {

// Asserts that a netCDF call succeeded, with netCDF's own message when it did not.
inline void nc_ok(int status) {
    ASSERT_EQ(status, NC_NOERR) << nc_strerror(status);
}

}  // namespace sparsenet::testing
