// Every public header compiles alone (`c++ -std=c++17 -fsyntax-only -Iinclude`), with no
// third-party include path, and reads nothing but the standard library and sparsenet/.
#include <gtest/gtest.h>

#include "library/library_test_util.h"
#include "support/test_support.h"

namespace sparsenet {
namespace {

TEST(PublicHeaders, EachCompilesAloneWithTheStandardLibraryOnly) {
    testing::TempDir dir;
    const std::string include = std::string(SPARSENET_SOURCE_DIR) + "/include";
    const std::vector<std::string> headers = testing::public_headers(include);
    ASSERT_GE(headers.size(), 10u);  // error.h ... trainer.h, recommender.h
    for (const std::string& h : headers) {
        EXPECT_EQ(testing::check_header_alone(SPARSENET_CXX_COMPILER, include, h, dir.path()), "");
    }
}

// <sparsenet/sparsenet.h> alone is the whole public API: it includes every other public header.
TEST(PublicHeaders, SparsenetHIncludesEveryPublicHeader) {
    const std::string include = std::string(SPARSENET_SOURCE_DIR) + "/include";
    const std::string umbrella = testing::read_file(include + "/sparsenet/sparsenet.h");
    for (const std::string& h : testing::public_headers(include)) {
        if (h == "sparsenet.h") continue;
        EXPECT_NE(umbrella.find("#include \"sparsenet/" + h + "\""), std::string::npos)
            << "sparsenet.h does not include " << h;
    }
}

// The check itself: a header that reaches a third-party header is reported.
TEST(PublicHeaders, TheCheckCatchesAThirdPartyInclude) {
    testing::TempDir dir;
    std::filesystem::create_directories(dir.file("include/sparsenet"));
    testing::write_file(dir.file("include/sparsenet/leaky.h"),
                        "#pragma once\n#include <netcdf.h>\n");
    const std::string why = testing::check_header_alone(SPARSENET_CXX_COMPILER, dir.file("include"),
                                                        "leaky.h", dir.path());
    EXPECT_NE(why.find("netcdf.h"), std::string::npos) << why;
}

}  // namespace
}  // namespace sparsenet
