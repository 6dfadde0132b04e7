// Reading JSON files with errors that name the file and the field.
#pragma once

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

namespace qinfer {

// Throws Error(kNotFound) when missing, Error(kFormat) with the parser's position when malformed.
nlohmann::json read_json_file(const std::filesystem::path& path);
// Same, keeping the file's key order (what a chat template iterates over, as Python dicts keep it).
nlohmann::ordered_json read_ordered_json_file(const std::filesystem::path& path);

// Typed field access: throws Error(kFormat) "FILE: field 'NAME' expected TYPE, got ..." on a missing or mistyped field.
template <typename T>
T json_field(const nlohmann::json& obj, const std::string& name, const std::filesystem::path& file);

// Same, with a default when the field is absent or null.
template <typename T>
T json_field_or(const nlohmann::json& obj, const std::string& name, const T& fallback,
                const std::filesystem::path& file);

// An integral JSON value as T (int32_t, int64_t): Error(kFormat) "FILE: field 'NAME' expected an integer in [MIN, MAX],
// got ..." for a value that is not an integer or does not fit, so that nothing is narrowed silently.
template <typename T>
T json_integer(const nlohmann::json& value, const std::string& name, const std::filesystem::path& file);

}  // namespace qinfer
