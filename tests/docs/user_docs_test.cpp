// README.md and docs/*.md speak to the people who use sparsenet. Checked on the source tree:
// - no wording about how the project's development machines are lent, allotted or budgeted
//   (docs/gpu.md once opened with it: GPU machines "lent to some sessions", "GPU spells", "the
//   device tool", minutes of "device time");
// - every relative link, and every anchor into a markdown file, points at something that exists;
// - README.md renders with no line over 200 characters, and docs/status.md (the long status
//   table's home) has no table row over 200 characters;
// - README.md still opens with `make demo` and `make test`.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "support/test_support.h"

namespace sparsenet {
namespace {

namespace fs = std::filesystem;

const fs::path kSource = SPARSENET_SOURCE_DIR;

std::string read_text(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

std::vector<std::string> lines_of(const std::string& text) {
    std::vector<std::string> lines;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    return lines;
}

// README.md and every docs/*.md (docs/examples/ holds code, not pages).
std::vector<fs::path> user_pages() {
    std::vector<fs::path> pages{kSource / "README.md"};
    for (const auto& e : fs::directory_iterator(kSource / "docs")) {
        if (e.is_regular_file() && e.path().extension() == ".md") pages.push_back(e.path());
    }
    std::sort(pages.begin(), pages.end());
    return pages;
}

std::string rel(const fs::path& p) {
    return fs::relative(p, kSource).string();
}

// Phrases of the development environment's machine allotment. Each is specific enough not to
// match ordinary prose ("silently" holds "lent", so whole words only; "ms per call" is a latency).
const std::vector<std::pair<std::string, std::regex>>& dev_phrases() {
    static const auto* phrases = [] {
        const auto icase = std::regex::ECMAScript | std::regex::icase;
        auto* v = new std::vector<std::pair<std::string, std::regex>>;
        for (const char* p :
             {R"(\blent\b)", R"(\b(gpu|next|same|this|a) spells?\b)", R"(device tool)",
              R"(device calls?\b)", R"(device time)", R"(minutes per (command|call))",
              R"(at most 30 minutes)", R"(\bsessions? only\b)", R"(\bCEO\b)",
              R"(\ballot(ted|ment|s)?\b)", R"(budget_left)", R"(idle_release)", R"(\bcarry\s*:)",
              R"(machines? (is|are) (lent|allotted|borrowed))"}) {
            v->emplace_back(p, std::regex(p, icase));
        }
        return v;
    }();
    return *phrases;
}

// "<line>: <phrase>: <text>" for each line of `text` that holds such a phrase.
std::vector<std::string> dev_wording(const std::string& text) {
    std::vector<std::string> hits;
    const std::vector<std::string> lines = lines_of(text);
    for (size_t i = 0; i < lines.size(); ++i) {
        for (const auto& [name, re] : dev_phrases()) {
            if (std::regex_search(lines[i], re)) {
                hits.push_back(std::to_string(i + 1) + ": /" + name + "/: " + lines[i]);
            }
        }
    }
    return hits;
}

// GitHub's anchor of a heading: lower case, punctuation dropped (letters, digits, '-', '_' and
// non-ASCII bytes kept), spaces to '-'.
std::string anchor_of(const std::string& heading) {
    std::string out;
    for (unsigned char c : heading) {
        if (c >= 0x80 || std::isalnum(c) || c == '-' || c == '_') {
            out += char(std::tolower(c));
        } else if (c == ' ') {
            out += '-';
        }
    }
    return out;
}

// The anchors of a markdown file's headings (outside code blocks), with GitHub's -1, -2 suffixes
// for repeated headings.
std::set<std::string> anchors_of(const std::string& text) {
    std::set<std::string> anchors;
    bool fenced = false;
    for (const std::string& line : lines_of(text)) {
        if (line.rfind("```", 0) == 0) fenced = !fenced;
        if (fenced || line.empty() || line[0] != '#') continue;
        const size_t start = line.find_first_not_of('#');
        if (start == std::string::npos || line[start] != ' ') continue;
        const std::string a = anchor_of(line.substr(start + 1));
        std::string unique = a;
        for (int n = 1; anchors.count(unique) != 0; ++n) unique = a + "-" + std::to_string(n);
        anchors.insert(unique);
    }
    return anchors;
}

// The relative links of a markdown page ([text](target), ![alt](target)) outside code blocks
// and code spans, each as "<line>: <target>" when it points at nothing: a missing file or
// folder, or an anchor that no heading of the target markdown file has.
std::vector<std::string> broken_links(const fs::path& page, const std::string& text) {
    static const std::regex link(R"(\]\(([^()\s]+)(\s+"[^"]*")?\))");
    std::vector<std::string> broken;
    const std::vector<std::string> lines = lines_of(text);
    bool fenced = false;
    for (size_t i = 0; i < lines.size(); ++i) {
        if (lines[i].rfind("```", 0) == 0) fenced = !fenced;
        if (fenced) continue;
        // Code spans hold examples, not links.
        const std::string line = std::regex_replace(lines[i], std::regex("`[^`]*`"), "``");
        for (auto it = std::sregex_iterator(line.begin(), line.end(), link);
             it != std::sregex_iterator(); ++it) {
            const std::string target = (*it)[1].str();
            if (std::regex_search(target, std::regex("^[a-zA-Z][a-zA-Z0-9+.-]*:"))) continue;
            const size_t hash = target.find('#');
            const std::string file = target.substr(0, hash);
            const std::string anchor = hash == std::string::npos ? "" : target.substr(hash + 1);
            const fs::path resolved = file.empty() ? page : page.parent_path() / file;
            const std::string where = std::to_string(i + 1) + ": " + target;
            if (!fs::exists(resolved)) {
                broken.push_back(where + " (no such file)");
            } else if (!anchor.empty() && resolved.extension() == ".md" &&
                       anchors_of(read_text(resolved)).count(anchor) == 0) {
                broken.push_back(where + " (no such heading in " + resolved.filename().string() +
                                 ")");
            }
        }
    }
    return broken;
}

TEST(UserDocs, NoDevelopmentEnvironmentWording) {
    const std::vector<fs::path> pages = user_pages();
    ASSERT_GE(pages.size(), 10u);
    for (const fs::path& page : pages) {
        for (const std::string& hit : dev_wording(read_text(page))) {
            ADD_FAILURE() << rel(page) << ":" << hit
                          << "\n  (the project's pages speak to its users: how the development "
                             "machines are lent or budgeted does not belong there)";
        }
    }
}

// The scripts a user runs (scripts/, the CI entry point) are read as documentation too: their
// header comments once told of "a lent GPU machine" and "one device call".
TEST(UserDocs, ScriptsHaveNoDevelopmentEnvironmentWording) {
    std::vector<fs::path> files{kSource / ".ci" / "run"};
    for (const auto& e : fs::directory_iterator(kSource / "scripts")) {
        if (e.is_regular_file()) files.push_back(e.path());
    }
    ASSERT_GE(files.size(), 8u);
    for (const fs::path& file : files) {
        for (const std::string& hit : dev_wording(read_text(file))) {
            ADD_FAILURE() << rel(file) << ":" << hit;
        }
    }
}

TEST(UserDocs, EveryRelativeLinkResolves) {
    size_t links = 0;
    for (const fs::path& page : user_pages()) {
        const std::string text = read_text(page);
        links += std::count(text.begin(), text.end(), ']');
        for (const std::string& b : broken_links(page, text)) {
            ADD_FAILURE() << rel(page) << ":" << b;
        }
    }
    EXPECT_GT(links, 50u);  // the pages were read
}

TEST(UserDocs, ReadmeAndStatusHaveShortLines) {
    const std::vector<std::string> readme = lines_of(read_text(kSource / "README.md"));
    ASSERT_GT(readme.size(), 20u);
    for (size_t i = 0; i < readme.size(); ++i) {
        EXPECT_LE(readme[i].size(), 200u) << "README.md:" << i + 1 << ": " << readme[i];
    }
    const std::vector<std::string> status = lines_of(read_text(kSource / "docs" / "status.md"));
    ASSERT_GT(status.size(), 20u);
    for (size_t i = 0; i < status.size(); ++i) {
        if (status[i].rfind('|', 0) == 0) {
            EXPECT_LE(status[i].size(), 200u) << "docs/status.md:" << i + 1 << ": " << status[i];
        }
    }
}

TEST(UserDocs, ReadmeOpensWithMakeDemoAndMakeTest) {
    const std::string readme = read_text(kSource / "README.md");
    const size_t fence = readme.find("```");
    ASSERT_NE(fence, std::string::npos);
    const size_t end = readme.find("```", fence + 3);
    ASSERT_NE(end, std::string::npos);
    const std::string first_block = readme.substr(fence, end - fence);
    EXPECT_NE(first_block.find("\nmake demo"), std::string::npos) << first_block;
    EXPECT_NE(first_block.find("\nmake test"), std::string::npos) << first_block;
    // Nothing but the title before it.
    EXPECT_EQ(readme.substr(0, fence).find("\n#", 1), std::string::npos);
}

// The checks themselves catch what they are for (a check that never fires proves nothing).
TEST(UserDocs, TheChecksCatchWhatTheyAreFor) {
    EXPECT_EQ(dev_wording("GPU machines (one H100) are lent to some sessions only, for at most 30 "
                          "minutes of device time")
                  .size(),
              4u);  // lent, sessions only, at most 30 minutes, device time
    EXPECT_FALSE(dev_wording("a GPU spell is one command").empty());
    EXPECT_FALSE(dev_wording("With the device tool, one call:").empty());
    EXPECT_FALSE(dev_wording("and 10 minutes per command").empty());
    EXPECT_TRUE(
        dev_wording("silently; 8.46 ms per call; excellent; the CLI spells it; a budget of 60 s")
            .empty());

    testing::TempDir dir;
    const fs::path page = dir.file("page.md");
    testing::write_file(dir.file("there.md"), "# Some Title: `x` (y)\n\n## Again\n## Again\n");
    const std::string text =
        "[ok](there.md) [ok](there.md#some-title-x-y) [ok](there.md#again-1) [web](https://x.y/z)\n"
        "[gone](missing.md) [bad anchor](there.md#nowhere) `[code](missing2.md)`\n"
        "```\n[fenced](missing3.md)\n```\n![img](img/missing.png)\n";
    testing::write_file(page.string(), text);
    const std::vector<std::string> broken = broken_links(page, text);
    ASSERT_EQ(broken.size(), 3u) << ::testing::PrintToString(broken);
    EXPECT_EQ(broken[0], "2: missing.md (no such file)");
    EXPECT_EQ(broken[1], "2: there.md#nowhere (no such heading in there.md)");
    EXPECT_EQ(broken[2], "6: img/missing.png (no such file)");
}

}  // namespace
}  // namespace sparsenet
