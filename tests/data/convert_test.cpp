// sparsenet::convert_text: every input format, index reuse and the error for each malformed
// input. Expected contents are stated per fixture or generated independently by the test.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <tuple>

#include "sparsenet/convert.h"
#include "sparsenet/error.h"
#include "support/test_support.h"

namespace sparsenet {
namespace {

using testing::TempDir;
using testing::write_file;

const std::string kFixtures = std::string(SPARSENET_TEST_DATA_DIR) + "/fixtures/";

// (sample label, feature label) -> value, read through the indexes.
using Cells = std::map<std::pair<std::string, std::string>, float>;

Cells cells(const Dataset& d, const LabelIndex& samples, const LabelIndex& features) {
    Cells out;
    for (uint64_t r = 0; r < d.rows; ++r) {
        for (uint64_t k = d.offsets[r]; k < d.offsets[r + 1]; ++k) {
            out[{samples.label(uint32_t(r)), features.label(d.indices[k])}] =
                d.is_boolean() ? 1.0f : d.values[k];
        }
    }
    return out;
}

Dataset convert_one(const std::string& path, const ConvertOptions& options, LabelIndex& samples,
                    LabelIndex& features, ConvertStats* stats = nullptr) {
    Dataset d = convert_text({path}, "data", options, samples, features, stats);
    d.validate(path);  // sorted, in range, no duplicates
    return d;
}

// Runs `body`, expecting Error(kData) whose message holds every piece of `parts`.
template <typename F>
void expect_error(F body, const std::vector<std::string>& parts) {
    try {
        body();
        ADD_FAILURE() << "no error; expected one mentioning '" << parts.front() << "'";
    } catch (const Error& e) {
        for (const std::string& p : parts) {
            EXPECT_NE(std::string(e.what()).find(p), std::string::npos)
                << "message: " << e.what() << "\nmissing: " << p;
        }
    }
}

// Converts `text` (written to a temp file) with default options; returns the error message.
void expect_text_error(const std::string& text, TextFormat format,
                       const std::vector<std::string>& parts) {
    TempDir dir;
    const std::string path = dir.file("input.txt");
    write_file(path, text);
    ConvertOptions options;
    options.format = format;
    std::vector<std::string> with_path = parts;
    with_path.insert(with_path.begin(), path + ":");
    expect_error(
        [&] {
            LabelIndex s, f;
            convert_one(path, options, s, f);
        },
        with_path);
}

TEST(Convert, DsstneIndicatorFixture) {
    LabelIndex s, f;
    ConvertStats stats;
    const Dataset d = convert_one(kFixtures + "dsstne.txt", {}, s, f, &stats);
    EXPECT_EQ(stats.format, TextFormat::kDsstne);
    EXPECT_TRUE(d.is_boolean());
    EXPECT_EQ(d.rows, 4u);  // u3 has a line and no features: an empty row
    EXPECT_EQ(d.cols, 4u);
    EXPECT_EQ(d.nnz(), 6u);
    // First-seen numbering, as DSSTNE's generateNetCDF.
    EXPECT_EQ(s.label(0), "u1");
    EXPECT_EQ(s.label(3), "u4");
    EXPECT_EQ(f.label(0), "10");
    EXPECT_EQ(f.label(1), "20");
    EXPECT_EQ(f.label(2), "30");
    EXPECT_EQ(f.label(3), "40");
    EXPECT_EQ(d.row_length(2), 0u);
    const Cells c = cells(d, s, f);
    EXPECT_EQ(c.size(), 6u);
    EXPECT_TRUE(c.count({"u4", "40"}) && c.count({"u4", "10"}));
}

TEST(Convert, DsstneAnalogKeepsValuesAndMissingValueIsZero) {
    LabelIndex s, f;
    ConvertOptions o;
    o.analog = true;
    const Dataset d = convert_one(kFixtures + "dsstne.txt", o, s, f);
    const Cells c = cells(d, s, f);
    EXPECT_FLOAT_EQ(c.at({"u1", "10"}), 5.0f);
    EXPECT_FLOAT_EQ(c.at({"u1", "20"}), 3.0f);
    EXPECT_FLOAT_EQ(c.at({"u1", "30"}), 0.0f);  // DSSTNE: a feature without a value is 0
    EXPECT_FLOAT_EQ(c.at({"u2", "20"}), 4.0f);
    EXPECT_FLOAT_EQ(c.at({"u4", "40"}), 1.0f);
    EXPECT_FLOAT_EQ(c.at({"u4", "10"}), 2.0f);
}

TEST(Convert, MovieLensCsvWithHeaderAndMinRating) {
    LabelIndex s, f;
    ConvertOptions o;
    o.analog = true;
    ConvertStats stats;
    Dataset d = convert_one(kFixtures + "ratings.csv", o, s, f, &stats);
    EXPECT_EQ(stats.format, TextFormat::kCsv);
    EXPECT_TRUE(stats.header_skipped);
    EXPECT_EQ(stats.lines, 6u);
    EXPECT_EQ(d.rows, 3u);
    EXPECT_EQ(d.cols, 3u);
    EXPECT_EQ(d.nnz(), 5u);
    EXPECT_FLOAT_EQ(cells(d, s, f).at({"3", "1029"}), 4.5f);

    LabelIndex s2, f2;
    o.analog = false;
    o.min_rating = 4.0;
    d = convert_one(kFixtures + "ratings.csv", o, s2, f2, &stats);
    EXPECT_EQ(stats.below_min_rating, 2u);
    EXPECT_EQ(d.nnz(), 3u);
    EXPECT_EQ(s2.size(), 2u);  // user 1 has no rating >= 4: no row
    EXPECT_EQ(cells(d, s2, f2), (Cells{{{"2", "31"}, 1}, {{"2", "10"}, 1}, {{"3", "1029"}, 1}}));
}

TEST(Convert, MovieLensTsvAndDat) {
    LabelIndex s, f;
    ConvertStats stats;
    Dataset d = convert_one(kFixtures + "u.data", {}, s, f, &stats);
    EXPECT_EQ(stats.format, TextFormat::kTsv);
    EXPECT_EQ(d.rows, 3u);
    EXPECT_EQ(d.cols, 3u);
    EXPECT_EQ(
        cells(d, s, f),
        (Cells{{{"196", "242"}, 1}, {{"186", "302"}, 1}, {{"22", "377"}, 1}, {{"196", "377"}, 1}}));
    LabelIndex s2, f2;
    d = convert_one(kFixtures + "ratings.dat", {}, s2, f2, &stats);
    EXPECT_EQ(stats.format, TextFormat::kDat);
    EXPECT_EQ(cells(d, s2, f2), (Cells{{{"1", "1193"}, 1}, {{"1", "661"}, 1}, {{"2", "1193"}, 1}}));
}

TEST(Convert, UserItemsUsesIdsAsIndices) {
    LabelIndex s, f;
    ConvertStats stats;
    const Dataset d = convert_one(kFixtures + "user_items.txt", {}, s, f, &stats);
    EXPECT_EQ(stats.format, TextFormat::kUserItems);
    EXPECT_EQ(d.rows, 3u);
    EXPECT_EQ(d.cols, 5u);  // items 0..4: the largest id + 1
    EXPECT_EQ(d.indices, (std::vector<uint32_t>{1, 3, 4, 2, 0, 3}));
    EXPECT_EQ(d.offsets, (std::vector<uint64_t>{0, 3, 4, 6}));
    EXPECT_TRUE(s.is_numeric());
    EXPECT_TRUE(f.is_numeric());

    // First-seen numbering on request.
    LabelIndex s2, f2;
    ConvertOptions o;
    o.ids = IdMode::kFirstSeen;
    const Dataset d2 = convert_one(kFixtures + "user_items.txt", o, s2, f2);
    EXPECT_EQ(f2.label(0), "3");
    EXPECT_EQ(cells(d2, s2, f2), cells(d, s, f));
}

TEST(Convert, Utf8NamesAreLabels) {
    LabelIndex s, f;
    const Dataset d = convert_one(kFixtures + "utf8.txt", {}, s, f);
    EXPECT_EQ(s.label(0), "Zoë");
    EXPECT_EQ(s.label(1), "東京");
    EXPECT_EQ(f.label(0), "café");
    EXPECT_EQ(d.nnz(), 3u);
    TempDir dir;
    f.write(dir.file("features"));
    EXPECT_EQ(LabelIndex::read(dir.file("features")).label(1), "naïve");
}

TEST(Convert, CrlfLineEndingsGiveTheSameDataset) {
    TempDir dir;
    const std::string lf = testing::read_file(kFixtures + "dsstne.txt");
    std::string crlf;
    for (char c : lf) crlf += c == '\n' ? std::string("\r\n") : std::string(1, c);
    write_file(dir.file("crlf.txt"), crlf);
    ConvertOptions o;
    o.analog = true;
    LabelIndex s1, f1, s2, f2;
    const Dataset a = convert_one(kFixtures + "dsstne.txt", o, s1, f1);
    const Dataset b = convert_one(dir.file("crlf.txt"), o, s2, f2);
    EXPECT_EQ(cells(a, s1, f1), cells(b, s2, f2));
}

// Random interactions written in every format convert back to exactly themselves.
TEST(Convert, EveryFormatRoundTripsGeneratedInteractions) {
    std::mt19937 rng(11);
    std::map<std::pair<int, int>, int> truth;  // (user, item) -> rating 1..5
    for (int k = 0; k < 3000; ++k) truth[{int(rng() % 200), int(rng() % 500)}] = 1 + rng() % 5;
    std::map<int, std::vector<std::pair<int, int>>> by_user;
    for (const auto& [ui, r] : truth) by_user[ui.first].push_back({ui.second, r});

    std::ostringstream dsstne, csv, tsv, dat, user_items;
    csv << "userId,movieId,rating,timestamp\n";
    for (const auto& [u, items] : by_user) {
        dsstne << "user" << u << '\t';
        user_items << u;
        for (size_t i = 0; i < items.size(); ++i) {
            const auto [item, r] = items[i];
            dsstne << (i ? ":" : "") << "item" << item << ',' << r;
            user_items << ' ' << item;
            csv << u << ',' << item << ',' << r << ",100\n";
            tsv << u << '\t' << item << '\t' << r << "\t100\n";
            dat << u << "::" << item << "::" << r << "::100\n";
        }
        dsstne << '\n';
        user_items << '\n';
    }
    TempDir dir;
    const std::vector<std::pair<std::string, std::string>> files = {{"in.dsstne", dsstne.str()},
                                                                    {"in.csv", csv.str()},
                                                                    {"in.tsv", tsv.str()},
                                                                    {"in.dat", dat.str()},
                                                                    {"in.items", user_items.str()}};
    for (const auto& [name, text] : files) {
        SCOPED_TRACE(name);
        write_file(dir.file(name), text);
        const bool items_format = name == "in.items";
        ConvertOptions o;
        o.analog = !items_format;
        LabelIndex s, f;
        const Dataset d = convert_one(dir.file(name), o, s, f);
        Cells expected;
        for (const auto& [ui, r] : truth) {
            const std::string prefix_u = name == "in.dsstne" ? "user" : "";
            const std::string prefix_i = name == "in.dsstne" ? "item" : "";
            expected[{prefix_u + std::to_string(ui.first), prefix_i + std::to_string(ui.second)}] =
                items_format ? 1.0f : float(r);
        }
        EXPECT_EQ(cells(d, s, f), expected);
        EXPECT_EQ(d.nnz(), truth.size());
    }
}

// A file of several parse chunks (4 MB each): first-seen order and line numbers must be those
// of one sequential pass.
TEST(Convert, LargeFileAcrossChunksKeepsOrderAndLineNumbers) {
    TempDir dir;
    std::string text;
    std::vector<std::string> first_seen;
    std::set<std::string> seen;
    std::mt19937 rng(5);
    const int lines = 400000;  // ~10 MB: three chunks
    for (int i = 0; i < lines; ++i) {
        const std::string item = "i" + std::to_string((rng() % 50000) * 7919 % 100003);
        if (seen.insert(item).second) first_seen.push_back(item);
        text += "u" + std::to_string(i) + "\t" + item + ",1:" + item + "x,2\n";
        if (seen.insert(item + "x").second) first_seen.push_back(item + "x");
    }
    write_file(dir.file("big.txt"), text);
    LabelIndex s, f;
    const Dataset d = convert_one(dir.file("big.txt"), {}, s, f);
    ASSERT_EQ(f.size(), first_seen.size());
    for (size_t i = 0; i < first_seen.size(); ++i) ASSERT_EQ(f.label(uint32_t(i)), first_seen[i]);
    EXPECT_EQ(d.rows, uint64_t(lines));
    EXPECT_EQ(d.nnz(), 2u * lines);

    // An error near the end is reported at its true line.
    text += "broken line without a tab\n";
    write_file(dir.file("big.txt"), text);
    expect_error(
        [&] {
            LabelIndex s2, f2;
            convert_one(dir.file("big.txt"), {}, s2, f2);
        },
        {dir.file("big.txt") + ":" + std::to_string(lines + 1) + ":", "missing tab"});
}

TEST(Convert, SharedSamplesIndexAlignsRows) {
    TempDir dir;
    write_file(dir.file("all.txt"), "a\tx:y\nb\ty\nc\tz\n");
    write_file(dir.file("part.txt"), "c\tq\nd\tx\na\tq\n");
    LabelIndex samples, features_in, features_out;
    const Dataset all = convert_one(dir.file("all.txt"), {}, samples, features_in);
    EXPECT_EQ(all.rows, 3u);
    ConvertStats stats;
    const Dataset part = convert_one(dir.file("part.txt"), {}, samples, features_out, &stats);
    // Every sample of the index has its row, in index order; the new one is appended.
    ASSERT_EQ(part.rows, 4u);
    EXPECT_EQ(samples.label(3), "d");
    EXPECT_EQ(stats.new_samples, 1u);
    EXPECT_EQ(stats.samples_without_line, 1u);  // b
    EXPECT_EQ(cells(part, samples, features_out),
              (Cells{{{"c", "q"}, 1}, {{"d", "x"}, 1}, {{"a", "q"}, 1}}));
    EXPECT_EQ(part.row_length(1), 0u);  // b: empty, not shifted
}

TEST(Convert, FrozenFeaturesIndexReportsOrDropsUnknownFeatures) {
    TempDir dir;
    write_file(dir.file("train.txt"), "a\tx:y\nb\ty\n");
    write_file(dir.file("test.txt"), "a\ty\nb\tnew1:x\nc\tnew2:new1\n");
    LabelIndex samples, features;
    convert_one(dir.file("train.txt"), {}, samples, features);
    ConvertOptions frozen;
    frozen.grow_features = false;
    expect_error(
        [&] {
            LabelIndex s = samples, f = features;
            convert_one(dir.file("test.txt"), frozen, s, f);
        },
        {dir.file("test.txt") + ":2:", "feature 'new1' is not in the features index (2 features)",
         "--drop-unknown"});
    frozen.unknown = UnknownFeatures::kDrop;
    ConvertStats stats;
    const Dataset d = convert_one(dir.file("test.txt"), frozen, samples, features, &stats);
    EXPECT_EQ(stats.dropped_unknown, 3u);
    EXPECT_EQ(stats.distinct_dropped, 2u);
    EXPECT_EQ(d.cols, 2u);
    EXPECT_EQ(features.size(), 2u);
    EXPECT_EQ(cells(d, samples, features), (Cells{{{"a", "y"}, 1}, {{"b", "x"}, 1}}));

    // Numeric ids against a frozen index: the same rules.
    write_file(dir.file("train.items"), "0 0 1\n1 1\n");
    write_file(dir.file("test.items"), "0 1\n1 0 7\n");
    LabelIndex us, is;
    convert_one(dir.file("train.items"), {}, us, is);
    ConvertOptions numeric_frozen;
    numeric_frozen.grow_features = false;
    expect_error(
        [&] {
            LabelIndex u = us, i = is;
            convert_one(dir.file("test.items"), numeric_frozen, u, i);
        },
        {dir.file("test.items") + ":2:", "feature 7 is not in the features index (2 features)"});
    numeric_frozen.unknown = UnknownFeatures::kDrop;
    const Dataset t = convert_one(dir.file("test.items"), numeric_frozen, us, is, &stats);
    EXPECT_EQ(stats.dropped_unknown, 1u);
    EXPECT_EQ(t.nnz(), 2u);
}

TEST(Convert, MergeAppendsNewFeaturesAndKeepsOldIndices) {
    TempDir dir;
    write_file(dir.file("index"), "y\t1\nx\t0\n");
    write_file(dir.file("in.txt"), "a\tz:x\n");
    LabelIndex samples;
    LabelIndex features = LabelIndex::read(dir.file("index"));
    ConvertStats stats;
    const Dataset d = convert_one(dir.file("in.txt"), {}, samples, features, &stats);
    EXPECT_EQ(stats.new_features, 1u);
    EXPECT_EQ(features.label(0), "x");
    EXPECT_EQ(features.label(1), "y");
    EXPECT_EQ(features.label(2), "z");
    EXPECT_EQ(d.indices, (std::vector<uint32_t>{0, 2}));
}

TEST(Convert, DirectoryInputReadsFilesInNameOrder) {
    TempDir dir;
    std::filesystem::create_directory(dir.file("in"));
    write_file(dir.file("in/b.txt"), "s2\tf2\n");
    write_file(dir.file("in/a.txt"), "s1\tf1\n");
    write_file(dir.file("in/.hidden"), "junk\n");
    const std::vector<std::string> files = expand_input_paths(dir.file("in"));
    ASSERT_EQ(files.size(), 2u);
    LabelIndex s, f;
    convert_text(files, "d", {}, s, f);
    EXPECT_EQ(s.label(0), "s1");
    EXPECT_EQ(f.label(1), "f2");
}

TEST(ConvertErrors, MalformedDsstneLines) {
    const auto F = TextFormat::kDsstne;
    expect_text_error("a\tx\nb y z\n", F, {":2:", "missing tab"});
    expect_text_error("a\tx\tz\n", F, {":1:", "second tab"});
    expect_text_error("a\tx,abc\n", F, {":1:", "bad number 'abc'"});
    expect_text_error("a\tx,1e999\n", F, {":1:", "bad number"});
    expect_text_error("a\tx,nan\n", F, {":1:", "bad number"});
    expect_text_error("a\tx::y\n", F, {":1:", "empty feature"});
    expect_text_error("a\t:x\n", F, {":1:", "empty feature"});
    expect_text_error("a\t,3\n", F, {":1:", "empty feature name"});
    expect_text_error("a\tx,1,2\n", F, {":1:", "more than one value"});
    expect_text_error("\tx\n", F, {":1:", "empty sample"});
    expect_text_error("a\tx\r:y\n", F, {":1:", "carriage return"});
    expect_text_error("a\tx\nb\ty\na\tz\n", F,
                      {":3:", "sample 'a' already has a line (line 1)", "one line"});
    expect_text_error("a\tx:y:x\n", F,
                      {":1:", "(twice on this line)", "feature 'x' more than once"});
    expect_text_error("a\tcaf\xc3\n", F, {":1:", "not valid UTF-8"});
    expect_text_error("a\t\xff\xfe\n", F, {":1:", "not valid UTF-8"});
    expect_text_error(std::string("a\tx\nb\tq\0r\n", 11), F, {":2:", "not valid UTF-8"});
}

TEST(ConvertErrors, MalformedRatingsLines) {
    expect_text_error("userId,movieId,rating,timestamp\n1,2,3,4\n1,2\n", TextFormat::kCsv,
                      {":3:", "expected 'user,item,rating[,timestamp]', got 2 fields"});
    expect_text_error("1,2,3,4\n1,3,x,4\n", TextFormat::kCsv, {":2:", "bad number 'x'"});
    expect_text_error("1,2,3,4\n1,3,4,-5\n", TextFormat::kCsv, {":2:", "bad timestamp '-5'"});
    expect_text_error("1,2,3,4,5,6\n", TextFormat::kCsv, {":1:", "got 6 fields"});
    expect_text_error("1,2,3,4\n1,5,3,4\n1,2,4,4\n", TextFormat::kCsv,
                      {":3:", "(also on line 1)", "sample '1' has feature '2' more than once"});
    expect_text_error("1\t2\t3\n1\t2\n", TextFormat::kTsv, {":2:", "got 2 fields"});
    expect_text_error("1::2::3::4\n1:2:3\n", TextFormat::kDat, {":2:", "got 1 field"});
    expect_text_error(",2,3\n", TextFormat::kCsv, {":1:", "empty user"});
    // A truncated last line (the file cut mid-line) is a malformed line.
    expect_text_error("1,2,3,4\n1,3", TextFormat::kCsv, {":2:", "got 2 fields"});
}

TEST(ConvertErrors, MalformedUserItemsLines) {
    const auto F = TextFormat::kUserItems;
    expect_text_error("0 1 2\n1 2 x3\n", F, {":2:", "bad feature id 'x3'"});
    expect_text_error("0 1 2\n-1 2\n", F, {":2:", "bad sample id '-1'"});
    expect_text_error("0 1 2\n1 2\n0 3\n", F, {":3:", "sample '0' already has a line (line 1)"});
    expect_text_error("0 1 1\n", F,
                      {":1:", "(twice on this line)", "sample '0' has feature '1' more than once"});
    expect_text_error("0 4294967295\n", F, {":1:", "bad feature id"});
}

TEST(ConvertErrors, FormatAndIndexMisuse) {
    TempDir dir;
    write_file(dir.file("x.items"), "0 1\n");
    ConvertOptions o;
    o.analog = true;
    LabelIndex s, f;
    EXPECT_THROW(convert_one(dir.file("x.items"), o, s, f), Error);
    LabelIndex named;
    named.insert("alice");
    LabelIndex f2;
    expect_error([&] { convert_one(dir.file("x.items"), {}, named, f2); },
                 {"numeric ids need a numeric samples index"});
    EXPECT_THROW(expand_input_paths(dir.file("missing.txt")), Error);
    EXPECT_THROW(parse_text_format("xml"), Error);
    write_file(dir.file("odd"), "justoneword\n");
    expect_error([&] { detect_text_format(dir.file("odd")); }, {"cannot tell the input format"});
}

// write_text (used by `generate --text` for benchmarks) and convert_text are inverses.
TEST(Convert, WriteTextRoundTripsEveryFormat) {
    TempDir dir;
    for (bool analog : {false, true}) {
        const Dataset d =
            testing::random_dataset(300, 120, testing::RowShape::kEmptyRows, analog, 9);
        for (TextFormat format : {TextFormat::kDsstne, TextFormat::kCsv, TextFormat::kTsv,
                                  TextFormat::kDat, TextFormat::kUserItems}) {
            if (analog && format == TextFormat::kUserItems) continue;
            SCOPED_TRACE(std::string(to_string(format)) + (analog ? " analog" : ""));
            const std::string path = dir.file("data.txt");
            write_text(path, d, format);
            ConvertOptions o;
            o.format = format;
            o.ids = IdMode::kNumeric;
            o.analog = analog || format != TextFormat::kUserItems;
            LabelIndex s, f;
            const Dataset back = convert_one(path, o, s, f);
            // MovieLens formats number users and items from 1 and only list non-empty rows.
            const uint32_t base =
                format == TextFormat::kDsstne || format == TextFormat::kUserItems ? 0 : 1;
            uint64_t nnz = 0;
            for (uint64_t r = 0; r < d.rows; ++r) {
                const uint64_t br = r + base;
                if (br >= back.rows) {  // trailing empty rows leave no line in these formats
                    EXPECT_EQ(d.row_length(r), 0u) << r;
                    continue;
                }
                ASSERT_EQ(back.row_length(br), d.row_length(r)) << r;
                for (uint64_t k = 0; k < d.row_length(r); ++k) {
                    EXPECT_EQ(back.indices[back.offsets[br] + k],
                              d.indices[d.offsets[r] + k] + base);
                    if (analog) {
                        EXPECT_EQ(back.values[back.offsets[br] + k], d.values[d.offsets[r] + k]);
                    }
                }
                nnz += d.row_length(r);
            }
            EXPECT_EQ(back.nnz(), nnz);
        }
    }
}

TEST(Convert, EmptyFileGivesNoRows) {
    TempDir dir;
    write_file(dir.file("empty.txt"), "");
    ConvertOptions o;
    o.format = TextFormat::kDsstne;
    LabelIndex s, f;
    const Dataset d = convert_one(dir.file("empty.txt"), o, s, f);
    EXPECT_EQ(d.rows, 0u);
    EXPECT_EQ(d.cols, 0u);
}

TEST(LabelIndex, NumericIndexAndCopies) {
    LabelIndex n = LabelIndex::numeric(3);
    EXPECT_TRUE(n.is_numeric());
    n.grow_numeric(5);
    EXPECT_EQ(n.size(), 6u);
    EXPECT_EQ(n.find("4"), 4u);
    LabelIndex copy = n;
    n.insert("x");
    EXPECT_EQ(copy.find("x"), LabelIndex::kNotFound);
    EXPECT_EQ(copy.find("5"), 5u);
    EXPECT_FALSE(n.is_numeric());
}

}  // namespace
}  // namespace sparsenet
