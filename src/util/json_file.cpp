#include "util/json_file.h"

#include <fstream>
#include <limits>
#include <sstream>

#include "util/error.h"

namespace qinfer {

namespace {

template <typename Json>
Json read_file_as(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    ErrorKind kind = std::filesystem::exists(path) ? ErrorKind::kFormat : ErrorKind::kNotFound;
    throw Error(kind, "cannot read " + path.string());
  }
  std::stringstream buffer;
  buffer << in.rdbuf();
  try {
    return Json::parse(buffer.str());
  } catch (const nlohmann::json::exception& e) {
    throw Error(ErrorKind::kFormat, path.string() + ": invalid JSON: " + e.what());
  }
}

}  // namespace

nlohmann::json read_json_file(const std::filesystem::path& path) { return read_file_as<nlohmann::json>(path); }

nlohmann::ordered_json read_ordered_json_file(const std::filesystem::path& path) {
  return read_file_as<nlohmann::ordered_json>(path);
}

namespace {

template <typename T>
const char* type_name() {
  if constexpr (std::is_same_v<T, bool>)
    return "a boolean";
  else if constexpr (std::is_integral_v<T>)
    return "an integer";
  else if constexpr (std::is_floating_point_v<T>)
    return "a number";
  else if constexpr (std::is_same_v<T, std::string>)
    return "a string";
  else
    return "a value";
}

template <typename T>
bool has_type(const nlohmann::json& v) {
  if constexpr (std::is_same_v<T, bool>)
    return v.is_boolean();
  else if constexpr (std::is_integral_v<T>)
    return v.is_number_integer();
  else if constexpr (std::is_floating_point_v<T>)
    return v.is_number();
  else if constexpr (std::is_same_v<T, std::string>)
    return v.is_string();
  else
    return true;
}

}  // namespace

template <typename T>
T json_integer(const nlohmann::json& value, const std::string& name, const std::filesystem::path& file) {
  constexpr auto kMin = std::numeric_limits<T>::min();
  constexpr auto kMax = std::numeric_limits<T>::max();
  bool fits = false;
  if (value.is_number_unsigned())
    fits = value.get<uint64_t>() <= static_cast<uint64_t>(kMax);
  else if (value.is_number_integer())
    fits = value.get<int64_t>() >= static_cast<int64_t>(kMin) && value.get<int64_t>() <= static_cast<int64_t>(kMax);
  if (!fits)
    throw Error(ErrorKind::kFormat, file.string() + ": field '" + name + "' expected an integer in [" +
                                        std::to_string(kMin) + ", " + std::to_string(kMax) + "], got " + value.dump());
  return value.get<T>();
}

template <typename T>
T json_field(const nlohmann::json& obj, const std::string& name, const std::filesystem::path& file) {
  if (!obj.is_object() || !obj.contains(name) || obj.at(name).is_null())
    throw Error(ErrorKind::kFormat, file.string() + ": missing field '" + name + "'");
  const auto& v = obj.at(name);
  if (!has_type<T>(v))
    throw Error(ErrorKind::kFormat,
                file.string() + ": field '" + name + "' expected " + type_name<T>() + ", got " + v.dump());
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>)
    return json_integer<T>(v, name, file);
  else
    return v.get<T>();
}

template <typename T>
T json_field_or(const nlohmann::json& obj, const std::string& name, const T& fallback,
                const std::filesystem::path& file) {
  if (!obj.is_object() || !obj.contains(name) || obj.at(name).is_null()) return fallback;
  return json_field<T>(obj, name, file);
}

template int32_t json_integer<int32_t>(const nlohmann::json&, const std::string&, const std::filesystem::path&);
template int64_t json_integer<int64_t>(const nlohmann::json&, const std::string&, const std::filesystem::path&);
template bool json_field<bool>(const nlohmann::json&, const std::string&, const std::filesystem::path&);
template int json_field<int>(const nlohmann::json&, const std::string&, const std::filesystem::path&);
template int64_t json_field<int64_t>(const nlohmann::json&, const std::string&, const std::filesystem::path&);
template double json_field<double>(const nlohmann::json&, const std::string&, const std::filesystem::path&);
template std::string json_field<std::string>(const nlohmann::json&, const std::string&, const std::filesystem::path&);
template bool json_field_or<bool>(const nlohmann::json&, const std::string&, const bool&, const std::filesystem::path&);
template int json_field_or<int>(const nlohmann::json&, const std::string&, const int&, const std::filesystem::path&);
template int64_t json_field_or<int64_t>(const nlohmann::json&, const std::string&, const int64_t&,
                                        const std::filesystem::path&);
template double json_field_or<double>(const nlohmann::json&, const std::string&, const double&,
                                      const std::filesystem::path&);
template std::string json_field_or<std::string>(const nlohmann::json&, const std::string&, const std::string&,
                                                const std::filesystem::path&);

}  // namespace qinfer
