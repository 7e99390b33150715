// Tests for dtrain's JSON layer over nlohmann: parse errors as one line naming the source and the
// position, duplicate keys, nesting limit, number printing, round trips and the typed reads.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "core/error.hpp"
#include "core/json.hpp"

using dtrain::Error;
using dtrain::Json;
using dtrain::json_at;
using dtrain::json_get;
using dtrain::parse_json;

namespace {

// Message of the Error thrown by parsing `text` ("" if none).
std::string parse_error(std::string_view text, const std::string& source = "run/x.json") {
  try {
    parse_json(text, source);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

template <class F>
std::string error_of(F f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

bool contains(const std::string& s, const std::string& sub) { return s.find(sub) != std::string::npos; }

}  // namespace

TEST(Json, ParseErrorIsOneLineNamingSourceAndPosition) {
  const std::string msg = parse_error("{\"a\": 1,\n \"b\" 2}", "RUN/checkpoints/step_1/trainer.json");
  EXPECT_EQ(msg.rfind("invalid JSON in RUN/checkpoints/step_1/trainer.json at line 2, column 6 (byte 14): ", 0),
            0u)
      << msg;
  EXPECT_TRUE(msg.ends_with("; fix the JSON text")) << msg;
  EXPECT_FALSE(contains(msg, "json.exception")) << msg;  // nlohmann's prefix is dropped

  const char* bad[] = {"",        "{",        "[1,]",       "{\"a\":1,}", "01",      "1.",
                       "-",       ".5",       "1e",         "tru",        "nul",     "\"abc",
                       "\"\\x\"", "\"\\u12\"", "\"\\ud83d\"", "\"\\ude00\"", "[1 2]",  "{1:2}",
                       "1 2",     "\"a\nb\"", "NaN",        "+1",         "1e999",   "\"\xff\"",
                       "[\"\\ud83d\\u0041\"]", "garbage\x01\x02"};
  for (const char* b : bad) {
    std::string m = parse_error(b);
    EXPECT_EQ(m.rfind("invalid JSON in run/x.json at line 1, column ", 0), 0u) << "input: " << b << " -> " << m;
    EXPECT_FALSE(contains(m, "\n")) << m;
  }
  // Binary garbage is quoted as \xNN, not as raw bytes.
  EXPECT_TRUE(contains(parse_error("\x89PNG\r\n"), "last read: '\\x89'")) << parse_error("\x89PNG\r\n");
  // A long unterminated string is quoted only in part.
  EXPECT_LT(parse_error("\"" + std::string(100000, 'a')).size(), 400u);
}

TEST(Json, DuplicateKeysAreErrorsAtTheSecondKey) {
  std::string msg = parse_error("{\"a\": 1,\n \"b\": {\"x\": 1},\n  \"a\": 2}");
  EXPECT_TRUE(contains(msg, "run/x.json at line 3, column 3 (byte 27): duplicate key \"a\"")) << msg;
  msg = parse_error(R"({"k\"": 1, "k\"": 2})");  // the opening quote, past the escaped one
  EXPECT_TRUE(contains(msg, "column 12 (byte 11): duplicate key \"k\\\"\"")) << msg;
  msg = parse_error(R"([{"x": {"a": 1, "a": 1}}])");
  EXPECT_TRUE(contains(msg, "duplicate key \"a\"")) << msg;
  // The same key in different objects is fine.
  Json j = parse_json(R"({"a": {"a": 1}, "b": {"a": 2}, "c": [{"a": 3}, {"a": 4}]})", "t");
  EXPECT_EQ(j["c"][1]["a"], 4);
}

TEST(Json, DeepNestingIsRefused) {
  EXPECT_TRUE(contains(parse_error(std::string(100000, '[')), "nesting deeper than 512 levels"));
  EXPECT_TRUE(contains(parse_error(std::string(600, '[') + std::string(600, ']')),
                       "at line 1, column 513 (byte 512): nesting deeper"));
  EXPECT_NO_THROW(parse_json(std::string(512, '[') + std::string(512, ']'), "t"));
}

TEST(Json, NumbersPrint) {
  EXPECT_EQ(Json(0).dump(), "0");
  EXPECT_EQ(Json(-7).dump(), "-7");
  EXPECT_EQ(Json(int64_t(1) << 53).dump(), "9007199254740992");
  EXPECT_EQ(Json(std::numeric_limits<uint64_t>::max()).dump(), "18446744073709551615");
  EXPECT_EQ(Json(0.1).dump(), "0.1");
  EXPECT_EQ(Json(0.1f).dump(), "0.10000000149011612");  // a float widened to double
  EXPECT_EQ(Json(1e300).dump(), "1e+300");
  EXPECT_EQ(Json(2.0).dump(), "2.0");
  EXPECT_EQ(Json(std::nan("")).dump(), "null");
  EXPECT_EQ(Json(std::numeric_limits<double>::infinity()).dump(), "null");
  EXPECT_EQ(Json(-std::numeric_limits<double>::infinity()).dump(), "null");
}

TEST(Json, NumbersRoundTrip) {
  std::mt19937_64 rng(7);
  for (int i = 0; i < 2000; ++i) {
    uint64_t bits = rng();
    double d;
    std::memcpy(&d, &bits, sizeof d);
    if (!std::isfinite(d)) continue;
    EXPECT_EQ(parse_json(Json(d).dump(), "t").get<double>(), d) << Json(d).dump();
  }
  for (double d : {0.0, 1.0, -1.5, 1e-300, 4.9e-324, 1.7976931348623157e308, 0.002}) {
    EXPECT_EQ(parse_json(Json(d).dump(), "t").get<double>(), d);
  }
  EXPECT_EQ(parse_json("1e-400", "t").get<double>(), 0.0);  // underflow reads as zero
  EXPECT_EQ(parse_json("-9223372036854775808", "t").get<int64_t>(), std::numeric_limits<int64_t>::min());
}

TEST(Json, ObjectsKeepOrderAndRoundTrip) {
  Json j = Json::object();
  j["z"] = 1;
  j["a"] = "q\" b\\ n\n t\t c\x01 / \xc3\xa9";
  j["m"] = Json::array({true, nullptr, 2.5, Json::object()});
  j["e"] = Json::array();
  EXPECT_EQ(j.dump(), R"({"z":1,"a":"q\" b\\ n\n t\t c\u0001 / é","m":[true,null,2.5,{}],"e":[]})");
  EXPECT_EQ(j.dump(2), "{\n  \"z\": 1,\n  \"a\": \"q\\\" b\\\\ n\\n t\\t c\\u0001 / \xc3\xa9\",\n"
                       "  \"m\": [\n    true,\n    null,\n    2.5,\n    {}\n  ],\n  \"e\": []\n}");
  EXPECT_EQ(parse_json(j.dump(), "t"), j);
  EXPECT_EQ(parse_json(j.dump(2), "t"), j);
  std::vector<std::string> keys;
  const Json parsed = parse_json(R"({"z":1,"a":2,"m":3})", "t");
  for (const auto& [k, v] : parsed.items()) keys.push_back(k);
  EXPECT_EQ(keys, (std::vector<std::string>{"z", "a", "m"}));
  EXPECT_EQ(parse_json(R"("\u0041\u00e9\u20AC\ud83d\ude00")", "t"), "A\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80");
}

TEST(Json, GarbageGivesErrorNeverAnotherException) {
  std::mt19937 rng(1);
  const std::string alphabet = "{}[]\",:0123456789-+.eEtrufalsn \\u\n\x01\xff";
  int errors = 0, parsed = 0;
  for (int i = 0; i < 5000; ++i) {
    std::string s(rng() % 40, ' ');
    for (char& c : s) c = alphabet[rng() % alphabet.size()];
    try {
      Json j = parse_json(s, "t");
      EXPECT_EQ(parse_json(j.dump(), "t"), j);
      ++parsed;
    } catch (const Error&) {
      ++errors;
    }
  }
  EXPECT_GT(errors, 0);
  EXPECT_GT(parsed, 0);
}

TEST(Json, TypedReadsNameSourceAndKey) {
  const std::string src = "ck/trainer.json";
  Json j = parse_json(R"({"step": 12, "loss": 2.5, "neg": -3, "s": "x", "b": true, "big": 18446744073709551615,
                          "config": {"data": {"dir": "/d"}, "n": 1}})", src);
  EXPECT_EQ(json_get<int64_t>(j, "step", src), 12);
  EXPECT_EQ(json_get<int64_t>(j, "neg", src), -3);
  EXPECT_EQ(json_get<double>(j, "step", src), 12.0);
  EXPECT_EQ(json_get<double>(j, "loss", src), 2.5);
  EXPECT_EQ(json_get<std::string>(j, "config.data.dir", src), "/d");
  EXPECT_TRUE(json_get<bool>(j, "b", src));
  EXPECT_EQ(json_at(j, "config.n", src), 1);

  EXPECT_EQ(error_of([&] { json_get<int64_t>(j, "epoch", src); }),
            "ck/trainer.json has no key \"epoch\"; fix the JSON text");
  EXPECT_EQ(error_of([&] { json_get<std::string>(j, "config.data.path", src); }),
            "ck/trainer.json has no key \"config.data.path\"; fix the JSON text");
  EXPECT_EQ(error_of([&] { json_get<int64_t>(j, "s", src); }),
            "ck/trainer.json: \"s\" is a string, expected a 64-bit integer; fix the JSON text");
  EXPECT_EQ(error_of([&] { json_get<int64_t>(j, "loss", src); }),
            "ck/trainer.json: \"loss\" is the number 2.5, expected a 64-bit integer; fix the JSON text");
  EXPECT_TRUE(contains(error_of([&] { json_get<int64_t>(j, "big", src); }), "expected a 64-bit integer"));
  EXPECT_TRUE(contains(error_of([&] { json_get<std::string>(j, "b", src); }), "is a boolean, expected a string"));
  EXPECT_TRUE(contains(error_of([&] { json_get<bool>(j, "s", src); }), "expected true or false"));
  EXPECT_EQ(error_of([&] { json_get<std::string>(j, "config.n.x", src); }),
            "ck/trainer.json: \"config.n\" is a number, expected an object; fix the JSON text");
  EXPECT_EQ(error_of([&] { json_at(Json::array(), "x", src); }),
            "ck/trainer.json: the top level is an array, expected an object; fix the JSON text");
}
