// zt/host/safetensors.h: files zt writes read back exactly and are laid out as Hugging Face's
// format says; files written by others (no padding, metadata last) read; damaged files are refused
// with the path named.
#include <doctest/doctest.h>

#include <filesystem>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <numeric>
#include <string>
#include <vector>

#include "../skip.h"
#include "../test_util.h"
#include "zt/error.h"
#include "zt/host/checkpoint.h"
#include "zt/host/safetensors.h"

namespace {

// A file as any writer would lay it out: 8-byte little-endian length, the JSON, the bytes.
void write_raw(const std::string& path, const std::string& json, const std::string& data) {
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>((json.size() >> (8 * i)) & 0xff);
  std::ofstream(path, std::ios::binary) << bytes << json << data;
}

std::vector<float> iota_floats(size_t n, float start) {
  std::vector<float> v(n);
  std::iota(v.begin(), v.end(), start);
  return v;
}

template <typename E>
std::string message_of(const std::string& path) {
  return zt::test::error_of<E>([&] { zt::SafetensorsReader r(path); });
}

}  // namespace

TEST_CASE("safetensors element sizes follow the dtype names") {
  CHECK(zt::safetensors_element_size("F32") == 4);
  CHECK(zt::safetensors_element_size("BF16") == 2);
  CHECK(zt::safetensors_element_size("F16") == 2);
  CHECK(zt::safetensors_element_size("I64") == 8);
  CHECK(zt::safetensors_element_size("U8") == 1);
  CHECK(zt::safetensors_element_size("f32") == 0);
  CHECK(zt::safetensors_element_size("") == 0);
}

TEST_CASE("safetensors: parts written in any order read back exactly, with metadata") {
  zt::test::TempDir dir;
  const std::string path = dir.file("m.safetensors");
  const auto a = iota_floats(6, 1.5f);  // 2x3
  const std::vector<int64_t> b = {-7, 1LL << 40, 3};
  const float scalar = -2.25f;
  {
    zt::SafetensorsWriter w;
    CHECK(w.add("a", "F32", {2, 3}) == 0);
    CHECK(w.add("b", "I64", {3}) == 1);
    CHECK(w.add("empty", "BF16", {0, 4}) == 2);
    CHECK(w.add("s", "F32", {}) == 3);
    w.set_metadata("format", "pt");
    w.open(path, 4096);
    CHECK(w.header_bytes() % 4096 == 0);
    CHECK(w.file_bytes() == w.header_bytes() + 6 * 4 + 3 * 8 + 4);
    // The second half first, then the first, then across tensors.
    w.write(0, 12, a.data() + 3, 12);
    w.write(0, 0, a.data(), 12);
    w.write(3, 0, &scalar, 4);
    w.write_data(24, b.data(), 24);
    w.close();
  }
  CHECK(std::filesystem::file_size(path) == 4096 + 52);
  zt::SafetensorsReader r(path);
  REQUIRE(r.entries().size() == 4);
  CHECK(r.header_bytes() == 4096);
  CHECK(r.metadata().at("format") == "pt");
  const zt::SafetensorsEntry* ea = r.find("a");
  REQUIRE(ea != nullptr);
  CHECK(ea->dtype == "F32");
  CHECK(ea->shape == std::vector<int64_t>{2, 3});
  std::vector<float> got_a(6);
  r.read(*ea, 0, got_a.data(), 24);
  CHECK(got_a == a);
  std::vector<float> middle(2);
  r.read(*ea, 8, middle.data(), 8);
  CHECK(middle == std::vector<float>{a[2], a[3]});
  std::vector<int64_t> got_b(3);
  r.read(*r.find("b"), 0, got_b.data(), 24);
  CHECK(got_b == b);
  float got_s = 0;
  r.read(*r.find("s"), 0, &got_s, 4);
  CHECK(got_s == scalar);
  REQUIRE(r.find("empty") != nullptr);
  CHECK(r.find("empty")->shape == std::vector<int64_t>{0, 4});
  CHECK(r.find("nope") == nullptr);
  CHECK_THROWS_AS(r.read(*ea, 20, got_a.data(), 8), zt::InternalError);
}

TEST_CASE("safetensors: the header is the format's: length prefix, JSON, space padding") {
  zt::test::TempDir dir;
  const std::string path = dir.file("h.safetensors");
  zt::SafetensorsWriter w;
  w.add("x", "F16", {2});
  w.open(path, 64);
  const uint16_t half[2] = {0x3c00, 0xc000};
  w.write(0, 0, half, 4);
  w.close();
  const std::string bytes = zt::test::read_file(path);
  uint64_t length = 0;
  for (int i = 7; i >= 0; --i) length = (length << 8) | static_cast<unsigned char>(bytes[i]);
  CHECK(8 + length == 64);
  const std::string json = bytes.substr(8, length);
  CHECK(json.front() == '{');
  CHECK(json.find("\"x\":{\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[0,4]}") !=
        std::string::npos);
  CHECK(json.find_last_not_of(' ') < json.size() - 1);  // padded with spaces
  CHECK(w.header() == bytes.substr(0, 64));
  CHECK(std::memcmp(bytes.data() + 64, half, 4) == 0);
}

TEST_CASE("safetensors: a file written by another tool (no padding, metadata last) reads") {
  zt::test::TempDir dir;
  const std::string path = dir.file("other.safetensors");
  const std::vector<float> w = {1, 2, 3, 4};
  const std::vector<float> bias = {9};
  std::string data(reinterpret_cast<const char*>(bias.data()), 4);
  data.append(reinterpret_cast<const char*>(w.data()), 16);
  // Tensors listed out of file order, as JSON objects may be.
  write_raw(path,
            R"({"w":{"dtype":"F32","shape":[2,2],"data_offsets":[4,20]},)"
            R"("bias":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
            R"("__metadata__":{"format":"pt"}})",
            data);
  zt::SafetensorsReader r(path);
  REQUIRE(r.entries().size() == 2);
  CHECK(r.entries()[0].name == "bias");  // file order
  std::vector<float> got(4);
  r.read(*r.find("w"), 0, got.data(), 16);
  CHECK(got == w);
  CHECK(r.metadata().at("format") == "pt");
}

TEST_CASE("safetensors: damaged or foreign files are refused, naming the path") {
  zt::test::TempDir dir;
  const std::string p = dir.file("bad.safetensors");
  const std::string four(4, 'x');
  auto config_error = [&](const std::string& json, const std::string& data, const char* why) {
    write_raw(p, json, data);
    const std::string m = message_of<zt::ConfigError>(p);
    CHECK_MESSAGE(m.find(p) != std::string::npos, m);
    CHECK_MESSAGE(m.find(why) != std::string::npos, m);
  };
  config_error("[1, 2]", "", "does not start with");
  config_error("{} []", "", "not a JSON object");
  config_error("{\"a\": ", "", "not a JSON object");
  config_error(R"({"a":{"dtype":"Q7","shape":[1],"data_offsets":[0,4]}})", four, "unknown dtype");
  config_error(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}})", four + four,
               "do not hold");
  config_error(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", four + four,
               "a hole or an overlap");
  config_error(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
               R"("b":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})",
               four, "a hole or an overlap");
  config_error(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", four + "xx",
               "2 bytes follow the last tensor");
  config_error(R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", four, "bad dimension");
  config_error(R"({"a":{"dtype":"F32","shape":[1]}})", four, "data_offsets");
  config_error(R"({"__metadata__":{"n":3}})", "", "not a string");

  // Plain text: its first 8 bytes read as a huge length.
  zt::test::write_file(p, "this is not a tensor file at all");
  CHECK(message_of<zt::ConfigError>(p).find("header length") != std::string::npos);
  zt::test::write_file(p, "abc");
  CHECK(message_of<zt::ConfigError>(p).find(p) != std::string::npos);

  // Truncated: the storage lost bytes, not a foreign format.
  write_raw(p, R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", four);
  std::string m = message_of<zt::IoError>(p);
  CHECK_MESSAGE(m.find("shorter than its header says") != std::string::npos, m);
  CHECK(m.find(p) != std::string::npos);
  { std::ofstream(p, std::ios::binary) << std::string("\x40\0\0\0\0\0\0\0{", 9); }
  CHECK(message_of<zt::IoError>(p).find("shorter than its header says") != std::string::npos);
  m = message_of<zt::IoError>(dir.file("missing.safetensors"));
  CHECK_MESSAGE(m.find("missing.safetensors") != std::string::npos, m);

  // A folder (a Hugging Face snapshot) opens and stats as a 4096-byte file: named as a folder,
  // with the files in it to choose from.
  const std::string folder = dir.file("snapshot");
  std::filesystem::create_directories(folder);
  m = message_of<zt::ConfigError>(folder);
  CHECK_MESSAGE(m.find(folder + " is a folder, not a safetensors file") != std::string::npos, m);
  CHECK_MESSAGE(m.find("it holds no *.safetensors file") != std::string::npos, m);
  zt::test::write_file(folder + "/model.safetensors", "x");
  zt::test::write_file(folder + "/config.json", "{}");
  m = message_of<zt::ConfigError>(folder);
  CHECK_MESSAGE(m.find("it holds model.safetensors)") != std::string::npos, m);
}

TEST_CASE("safetensors: hostile headers are refused before any large allocation") {
  zt::test::TempDir dir;
  const std::string p = dir.file("hostile.safetensors");
  const std::string four(4, 'x');
  auto refused = [&](const std::string& why) {
    const std::string m = message_of<zt::ConfigError>(p);
    CHECK_MESSAGE(m.find(p) != std::string::npos, m);
    CHECK_MESSAGE(m.find(why) != std::string::npos, m);
  };
  // A length prefix of 100 GB over a small file: refused from the 8 bytes, nothing allocated.
  {
    std::string prefix(8, '\0');
    const uint64_t length = 100ull << 30;
    for (int i = 0; i < 8; ++i) prefix[i] = static_cast<char>((length >> (8 * i)) & 0xff);
    zt::test::write_file(p, prefix + "{}");
  }
  refused("header length 107374182400");
  // Offsets past the file, and offsets that overflow 64 bits.
  write_raw(p,
            R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
            R"("b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
            four);
  CHECK(message_of<zt::IoError>(p).find("shorter than its header says") != std::string::npos);
  write_raw(p, R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[18446744073709551612,0]}})",
            four);
  refused("bad data offset");
  write_raw(p, R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[9223372036854775807,0]}})", four);
  refused("do not hold");
  // A shape whose element count overflows int64: no byte count can match it.
  write_raw(p, R"({"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,4]}})",
            four);
  refused("do not hold");
  // A dtype that is none, and one that is not a string.
  write_raw(p, R"({"a":{"dtype":"F32; rm -rf /","shape":[1],"data_offsets":[0,4]}})", four);
  refused("unknown dtype");
  write_raw(p, R"({"a":{"dtype":32,"shape":[1],"data_offsets":[0,4]}})", four);
  refused("no dtype string");
  // The same tensor name twice: JSON parsers keep one of them silently; this file means two.
  write_raw(p,
            R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
            R"("a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
            four + four);
  refused("names 'a' twice");
}

TEST_CASE("safetensors writer: contract violations and unwritable places") {
  zt::test::TempDir dir;
  zt::SafetensorsWriter w;
  w.add("a", "F32", {2});
  CHECK_THROWS_AS(w.add("a", "F32", {2}), zt::InternalError);
  CHECK_THROWS_AS(w.add("b", "F31", {2}), zt::InternalError);
  CHECK_THROWS_AS(w.add("c", "F32", {-2}), zt::InternalError);
  CHECK_THROWS_AS(w.write(0, 0, "xxxx", 4), zt::InternalError);  // before open()

  const std::string nowhere = dir.file("no/such/folder/x.safetensors");
  try {
    w.open(nowhere);
    FAIL("open in a missing folder succeeded");
  } catch (const zt::IoError& e) {
    CHECK(std::string(e.what()).find(nowhere) != std::string::npos);
  }

  zt::SafetensorsWriter ok;
  ok.add("a", "F32", {2});
  ok.open(dir.file("ok.safetensors"));
  const float two[2] = {1, 2};
  CHECK_THROWS_AS(ok.write(0, 4, two, 8), zt::InternalError);
  CHECK_THROWS_AS(ok.write(1, 0, two, 4), zt::InternalError);
  CHECK_THROWS_AS(ok.write_data(0, two, 12), zt::InternalError);
  ok.write(0, 0, two, 8);
  ok.close();
  ok.close();  // a second close does nothing

  // A header past what readers accept is refused when written: such a file was published and
  // then never loaded.
  zt::SafetensorsWriter huge;
  huge.add("a", "F32", {2});
  huge.set_metadata("notes", std::string(static_cast<size_t>(zt::kSafetensorsMaxHeaderJson), 'x'));
  const std::string too_big = dir.file("too_big.safetensors");
  const std::string said = "cannot write " + too_big + ": its safetensors header";
  CHECK_THROWS_WITH_AS(huge.open(too_big), doctest::Contains(said.c_str()), zt::IoError);
  CHECK_FALSE(std::filesystem::exists(too_big));
}

TEST_CASE("safetensors writer: a full device is an IoError naming the path and the bytes") {
  // /dev/full refuses every write with ENOSPC, as a disk that has filled.
  if (!std::filesystem::exists("/dev/full")) ZT_SKIP("no /dev/full on this system");
  zt::SafetensorsWriter w;
  w.add("a", "F32", {1024});
  try {
    w.open("/dev/full", 8);
    FAIL("writing to /dev/full succeeded");
  } catch (const zt::IoError& e) {
    const std::string m = e.what();
    CHECK_MESSAGE(m.find("/dev/full") != std::string::npos, m);
    CHECK_MESSAGE(m.find("disk is full") != std::string::npos, m);
    CHECK_MESSAGE(m.find(std::to_string(w.header_bytes()) + " bytes") != std::string::npos, m);
  }
}

TEST_CASE("CheckpointTensor::numel is the product of the shape") {
  CHECK(zt::CheckpointTensor{"w", {3, 4}}.numel() == 12);
  CHECK(zt::CheckpointTensor{"s", {}}.numel() == 1);
  CHECK(zt::CheckpointTensor{"e", {5, 0}}.numel() == 0);
}
