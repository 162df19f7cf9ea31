// Environment variables set (or unset) for one scope: the destructor restores what was there.
#pragma once
#include <stdlib.h>

#include <initializer_list>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace weft::test {

class ScopedEnv {
 public:
  // value nullptr unsets the variable for the scope.
  ScopedEnv(const char* name, const char* value) { set(name, value); }
  ScopedEnv(const char* name, const std::string& value) { set(name, value.c_str()); }
  ScopedEnv(std::initializer_list<std::pair<const char*, std::string>> vars) {
    for (const auto& [name, value] : vars) set(name, value.c_str());
  }
  ~ScopedEnv() {
    for (auto it = saved_.rbegin(); it != saved_.rend(); ++it) {
      if (it->second)
        setenv(it->first.c_str(), it->second->c_str(), 1);
      else
        unsetenv(it->first.c_str());
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  void set(const char* name, const char* value) {
    const char* old = getenv(name);
    saved_.emplace_back(name, old ? std::optional<std::string>(old) : std::nullopt);
    if (value)
      setenv(name, value, 1);
    else
      unsetenv(name);
  }

  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

}  // namespace weft::test
