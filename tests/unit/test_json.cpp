// Tests for dtrain::Json: parsing, printing, number round trips, escapes and error reporting.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "core/error.hpp"
#include "core/json.hpp"

using dtrain::Error;
using dtrain::Json;

namespace {

// Message of the Error thrown by parsing `text` ("" if none).
std::string parse_error(std::string_view text) {
  try {
    Json::parse(text);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(Json, ParsesAllTypes) {
  Json j = Json::parse(R"( {"n": null, "t": true, "f": false, "x": -12.5e1, "s": "hi",
                            "a": [1, [2], {}], "o": {"k": "v"}} )");
  ASSERT_TRUE(j.is_object());
  EXPECT_TRUE(j["n"].is_null());
  EXPECT_TRUE(j["t"].as_bool());
  EXPECT_FALSE(j["f"].as_bool());
  EXPECT_EQ(j["x"].as_number(), -125.0);
  EXPECT_EQ(j["s"].as_string(), "hi");
  ASSERT_TRUE(j["a"].is_array());
  EXPECT_EQ(j["a"].size(), 3u);
  EXPECT_EQ(j["a"][1][0].as_int64(), 2);
  EXPECT_TRUE(j["a"][2].is_object());
  EXPECT_EQ(j.at("o").at("k").as_string(), "v");
  EXPECT_TRUE(j.contains("o"));
  EXPECT_FALSE(j.contains("zz"));
}

TEST(Json, KeepsInsertionOrder) {
  Json j = Json::parse(R"({"z":1,"a":2,"m":3})");
  std::vector<std::string> keys;
  for (const auto& [k, v] : j.items()) keys.push_back(k);
  EXPECT_EQ(keys, (std::vector<std::string>{"z", "a", "m"}));
  EXPECT_EQ(j.dump(), R"({"z":1,"a":2,"m":3})");

  Json b;  // null turns into an object on operator[]
  b["second"] = 2;
  b["first"] = "x";
  b["second"] = 3;  // overwrite keeps position
  EXPECT_EQ(b.dump(), R"({"second":3,"first":"x"})");
}

TEST(Json, BuildsAndDumpsCompact) {
  Json j = Json::object();
  j["step"] = int64_t(42);
  j["loss"] = 2.5;
  j["ok"] = true;
  j["none"] = nullptr;
  Json arr;
  arr.push_back(1);
  arr.push_back("two");
  arr.push_back(Json::array());
  j["arr"] = arr;
  EXPECT_EQ(j.dump(), R"({"step":42,"loss":2.5,"ok":true,"none":null,"arr":[1,"two",[]]})");
  EXPECT_EQ(Json::parse(j.dump()), j);
  EXPECT_EQ(Json::parse(j.dump(2)), j);
  EXPECT_NE(j.dump(2).find("\n  \"step\": 42"), std::string::npos);
}

TEST(Json, IntegersPrintWithoutDecimalPoint) {
  EXPECT_EQ(Json(0).dump(), "0");
  EXPECT_EQ(Json(-7).dump(), "-7");
  EXPECT_EQ(Json(int64_t(1) << 53).dump(), "9007199254740992");
  EXPECT_EQ(Json(-(double)(int64_t(1) << 53)).dump(), "-9007199254740992");
  EXPECT_EQ(Json(1e300).dump(), "1e+300");  // beyond 2^53: shortest float form
  EXPECT_EQ(Json(0.1).dump(), "0.1");
  EXPECT_EQ(Json(std::nan("")).dump(), "null");
  EXPECT_EQ(Json(std::numeric_limits<double>::infinity()).dump(), "null");
}

TEST(Json, NumbersRoundTrip) {
  std::mt19937_64 rng(7);
  for (int i = 0; i < 20000; ++i) {
    uint64_t bits = rng();
    double d;
    std::memcpy(&d, &bits, 8);
    if (!std::isfinite(d)) continue;
    std::string s = Json(d).dump();
    double back = Json::parse(s).as_number();
    ASSERT_EQ(std::memcmp(&back, &d, 8), 0) << s;
  }
  for (double d : {0.1, 1.0 / 3, 123456789.125, 5e-324, 1.7976931348623157e308, -2.5e-10}) {
    EXPECT_EQ(Json::parse(Json(d).dump()).as_number(), d);
  }
  float f = 0.1f;
  EXPECT_EQ(float(Json::parse(Json(f).dump()).as_number()), f);
  EXPECT_EQ(Json::parse("1e-400").as_number(), 0.0);  // underflow reads as zero
  EXPECT_NE(parse_error("1e400").find("out of range"), std::string::npos);
}

TEST(Json, StringEscapes) {
  Json s(std::string("q\" b\\ n\n t\t c\x01 / \xc3\xa9"));
  EXPECT_EQ(s.dump(), "\"q\\\" b\\\\ n\\n t\\t c\\u0001 / \xc3\xa9\"");
  EXPECT_EQ(Json::parse(s.dump()), s);

  EXPECT_EQ(Json::parse(R"("\"\\\/\b\f\n\r\t")").as_string(), "\"\\/\b\f\n\r\t");
  EXPECT_EQ(Json::parse(R"("\u0041\u00e9\u20AC")").as_string(), "A\xc3\xa9\xe2\x82\xac");
  // U+1F600 as a surrogate pair -> 4-byte UTF-8.
  EXPECT_EQ(Json::parse(R"("\ud83d\ude00")").as_string(), "\xf0\x9f\x98\x80");
  EXPECT_EQ(Json::parse(R"("\u0000")").as_string(), std::string(1, '\0'));
  EXPECT_EQ(Json(std::string(1, '\0')).dump(), "\"\\u0000\"");
}

TEST(Json, MalformedInputThrowsWithPosition) {
  EXPECT_NE(parse_error("{\"a\": 1,\n \"b\" 2}").find("line 2, column 6"), std::string::npos)
      << parse_error("{\"a\": 1,\n \"b\" 2}");
  const char* bad[] = {"",        "{",        "[1,]",       "{\"a\":1,}", "01",    "1.",
                       "-",       ".5",       "1e",         "tru",        "nul",   "\"abc",
                       "\"\\x\"", "\"\\u12\"", "\"\\ud83d\"", "\"\\ude00\"", "[1 2]", "{1:2}",
                       "1 2",     "\"a\nb\"", "{\"a\":1,\"a\":2}", "NaN",  "+1",    "[\"\\ud83d\\u0041\"]"};
  for (const char* b : bad) {
    std::string msg = parse_error(b);
    EXPECT_NE(msg.find("invalid JSON at line"), std::string::npos) << "input: " << b << " -> " << msg;
  }
  // Deep nesting is refused, not a stack overflow.
  EXPECT_NE(parse_error(std::string(100000, '[')).find("nesting deeper"), std::string::npos);
}

TEST(Json, GarbageNeverCrashes) {
  std::mt19937 rng(1);
  const std::string alphabet = "{}[]\",:0123456789-+.eEtrufalsn \\u\n\x01\xff";
  int errors = 0;
  for (int i = 0; i < 5000; ++i) {
    std::string s(rng() % 40, ' ');
    for (char& c : s) c = alphabet[rng() % alphabet.size()];
    try {
      Json j = Json::parse(s);
      EXPECT_EQ(Json::parse(j.dump()), j);
    } catch (const Error&) {
      ++errors;
    }
  }
  EXPECT_GT(errors, 0);
}

TEST(Json, AccessorErrors) {
  Json j = Json::parse(R"({"a": "x", "n": 1.5, "arr": [1]})");
  EXPECT_THROW(j.at("missing"), Error);
  try {
    j.at("missing");
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("\"missing\""), std::string::npos);
  }
  EXPECT_THROW(j["a"].as_number(), Error);
  EXPECT_THROW(j["n"].as_string(), Error);
  EXPECT_THROW(j["n"].as_int64(), Error);  // not integral
  EXPECT_THROW(j["arr"].at(size_t(5)), Error);
  EXPECT_THROW(j["a"].push_back(1), Error);
  const Json& cj = j;
  EXPECT_THROW(cj["missing"], Error);  // const operator[] does not insert
  EXPECT_EQ(j.size(), 3u);
  EXPECT_THROW(Json(Json::Object{{"k", 1}, {"k", 2}}), Error);
}

TEST(Json, EqualityIgnoresObjectOrder) {
  EXPECT_EQ(Json::parse(R"({"a":1,"b":[true,null]})"), Json::parse(R"({"b":[true,null],"a":1})"));
  EXPECT_NE(Json::parse(R"({"a":1})"), Json::parse(R"({"a":2})"));
  EXPECT_NE(Json::parse("[1,2]"), Json::parse("[2,1]"));
  EXPECT_NE(Json(1), Json("1"));
}
