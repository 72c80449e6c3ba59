// A request the server refuses, in the OpenAI error form:
// {"error": {"message", "type", "param", "code"}} with its HTTP status.
// Everything a client can get wrong is thrown as one of these and answered
// with a 4xx; anything else that escapes is a 500.
#pragma once

#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

namespace splitdec::serve {

struct ApiError : std::runtime_error {
  int status;
  std::string type;   // invalid_request_error, authentication_error, ...
  std::string param;  // the request field at fault, or empty
  std::string code;   // a short machine-readable reason, or empty

  ApiError(int status, std::string message, std::string param = {}, std::string code = {},
           std::string type = "invalid_request_error")
      : std::runtime_error(std::move(message)), status(status), type(std::move(type)), param(std::move(param)),
        code(std::move(code)) {}

  nlohmann::json body() const { return error_body(what(), type, param, code); }

  static nlohmann::json error_body(const std::string& message, const std::string& type, const std::string& param,
                                   const std::string& code) {
    nlohmann::json e = {{"message", message}, {"type", type}, {"param", nullptr}, {"code", nullptr}};
    if (!param.empty()) e["param"] = param;
    if (!code.empty()) e["code"] = code;
    return {{"error", e}};
  }
};

// A 400 naming the field.
inline ApiError bad_field(const std::string& param, const std::string& message) {
  return ApiError(400, message, param, "invalid_value");
}

}  // namespace splitdec::serve
