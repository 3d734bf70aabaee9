// docs/config-reference.md against the parser: the keys and enumerated values the parser accepts
// (config_key_sets(), config_value_sets()) must be exactly those in the page's tables, and the
// "Not implemented yet" table must list exactly what the parser rejects as not implemented. A key
// added to the parser without documentation, or documented without being accepted, fails here.
//
// The page's layout, as read here: a heading naming objects in backticks (`$`, `$.Layers[]`, ...)
// introduces key tables whose first column holds the keys; a heading "Values of `<key>`"
// introduces a value table whose first column holds the values (aliases separated by commas);
// the section "Not implemented yet" has a table of (object or key, rejected keys or values).

#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "sparsenet/config.h"

namespace sparsenet {
namespace {

using Names = std::set<std::string>;

// The backticked spans of a piece of markdown.
std::vector<std::string> backticked(const std::string& s) {
    std::vector<std::string> out;
    size_t pos = 0;
    while (true) {
        const size_t a = s.find('`', pos);
        if (a == std::string::npos) break;
        const size_t b = s.find('`', a + 1);
        if (b == std::string::npos) break;
        out.push_back(s.substr(a + 1, b - a - 1));
        pos = b + 1;
    }
    return out;
}

// Cells of a table row; "\|" is a literal bar inside a cell.
std::vector<std::string> cells(const std::string& line) {
    std::vector<std::string> out;
    std::string cur;
    for (size_t i = 1; i < line.size(); ++i) {
        if (line[i] == '\\' && i + 1 < line.size() && line[i + 1] == '|') {
            cur += '|';
            ++i;
        } else if (line[i] == '|') {
            out.push_back(cur);
            cur.clear();
        } else {
            cur += line[i];
        }
    }
    return out;
}

struct Section {
    std::string heading;
    std::vector<std::vector<std::string>> rows;  // table body rows (header and rule skipped)
};

std::vector<Section> read_sections(const std::string& path) {
    std::ifstream in(path);
    EXPECT_TRUE(in.good()) << path;
    std::vector<Section> sections(1);
    std::string line;
    bool in_code = false;
    int table_line = -1;  // position inside the current table; -1 outside tables
    while (std::getline(in, line)) {
        if (line.rfind("```", 0) == 0) in_code = !in_code;
        if (in_code) continue;
        if (line.rfind("#", 0) == 0) {
            sections.push_back({line, {}});
            table_line = -1;
            continue;
        }
        if (line.rfind("|", 0) != 0) {
            table_line = -1;
            continue;
        }
        ++table_line;
        if (table_line >= 2) sections.back().rows.push_back(cells(line));
    }
    return sections;
}

struct Documented {
    std::map<std::string, Names> keys;             // object -> keys
    std::map<std::string, Names> values;           // key -> values
    std::map<std::string, Names> not_implemented;  // object or key -> rejected names
};

Documented read_doc() {
    Documented d;
    for (const Section& s : read_sections(SPARSENET_SOURCE_DIR "/docs/config-reference.md")) {
        if (s.heading.find("Not implemented yet") != std::string::npos) {
            for (const auto& row : s.rows) {
                if (row.size() < 2) continue;
                for (const std::string& object : backticked(row[0])) {
                    if (object.rfind("$", 0) != 0) continue;  // other tables of the section
                    for (const std::string& name : backticked(row[1]))
                        d.not_implemented[object].insert(name);
                }
            }
            continue;
        }
        std::vector<std::string> objects;
        for (const std::string& b : backticked(s.heading))
            if (b.rfind("$", 0) == 0) objects.push_back(b);
        if (objects.empty()) continue;
        const bool values = s.heading.find("Values of") != std::string::npos;
        for (const auto& row : s.rows) {
            if (row.empty()) continue;
            for (const std::string& name : backticked(row[0]))
                for (const std::string& object : objects)
                    (values ? d.values : d.keys)[object].insert(name);
        }
    }
    return d;
}

Names as_set(const std::vector<std::string>& v) {
    return Names(v.begin(), v.end());
}

std::string listed(const Names& n) {
    std::string s;
    for (const std::string& x : n) s += (s.empty() ? "" : ", ") + x;
    return "{" + s + "}";
}

TEST(ConfigReferenceDoc, EveryAcceptedKeyIsDocumentedAndNothingElse) {
    const Documented doc = read_doc();
    ASSERT_FALSE(doc.keys.empty()) << "no key tables found in docs/config-reference.md";
    Names objects;
    for (const ConfigKeySet& set : config_key_sets()) {
        SCOPED_TRACE(set.object);
        objects.insert(set.object);
        auto it = doc.keys.find(set.object);
        ASSERT_NE(it, doc.keys.end()) << "no table of the keys of " << set.object;
        EXPECT_EQ(it->second, as_set(set.accepted))
            << "documented " << listed(it->second) << "\n  accepted "
            << listed(as_set(set.accepted));
        const Names rejected =
            doc.not_implemented.count(set.object) ? doc.not_implemented.at(set.object) : Names{};
        EXPECT_EQ(rejected, as_set(set.not_implemented))
            << "documented as not implemented " << listed(rejected) << "\n  rejected by the parser "
            << listed(as_set(set.not_implemented));
    }
    for (const auto& [object, keys] : doc.keys) {
        EXPECT_TRUE(objects.count(object))
            << "the page documents keys of " << object << ", which the parser does not know";
    }
}

TEST(ConfigReferenceDoc, EveryAcceptedValueIsDocumentedAndNothingElse) {
    const Documented doc = read_doc();
    Names keys;
    for (const ConfigValueSet& set : config_value_sets()) {
        SCOPED_TRACE(set.key);
        keys.insert(set.key);
        auto it = doc.values.find(set.key);
        ASSERT_NE(it, doc.values.end()) << "no table of the values of " << set.key;
        EXPECT_EQ(it->second, as_set(set.accepted))
            << "documented " << listed(it->second) << "\n  accepted "
            << listed(as_set(set.accepted));
        const Names rejected =
            doc.not_implemented.count(set.key) ? doc.not_implemented.at(set.key) : Names{};
        EXPECT_EQ(rejected, as_set(set.not_implemented))
            << "documented as not implemented " << listed(rejected) << "\n  rejected by the parser "
            << listed(as_set(set.not_implemented));
    }
    for (const auto& [key, values] : doc.values) {
        EXPECT_TRUE(keys.count(key))
            << "the page documents values of " << key << ", which the parser does not enumerate";
    }
    // The "Not implemented yet" table names only objects and keys the parser knows.
    Names known = keys;
    for (const ConfigKeySet& set : config_key_sets()) known.insert(set.object);
    for (const auto& [object, names] : doc.not_implemented) {
        EXPECT_TRUE(known.count(object)) << "not-implemented row for unknown " << object;
    }
}

// The test above is only as good as its reading of the page: check that reading on the parts
// whose content is known.
TEST(ConfigReferenceDoc, ReaderFindsTheKnownTables) {
    const Documented doc = read_doc();
    EXPECT_TRUE(doc.keys.at("$").count("Layers"));
    EXPECT_TRUE(doc.keys.at("$.Layers[]").count("pDropout"));
    EXPECT_TRUE(doc.keys.at("$.DataScaledMarginalCrossEntropy").count("oneTarget"));
    EXPECT_TRUE(doc.values.at("$.Layers[].Activation").count("Relu"));
    EXPECT_TRUE(doc.values.at("$.ErrorFunction").count("Cross Entropy"));
    EXPECT_TRUE(doc.not_implemented.at("$").count("LRN"));
    EXPECT_EQ(cells("| a \\| b | `c` |"), (std::vector<std::string>{" a | b ", " `c` "}));
}

}  // namespace
}  // namespace sparsenet
