#include "utf8_text.h"

#include <utf8proc.h>

namespace shardscope::trace {

char32_t codePointAt(std::string_view s, size_t i, size_t* length) {
  utf8proc_int32_t code = 0;
  const utf8proc_ssize_t read =
      utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t*>(s.data() + i),
                       utf8proc_ssize_t(s.size() - i), &code);
  if (read <= 0) {
    *length = 1;
    return static_cast<unsigned char>(s[i]);
  }
  *length = size_t(read);
  return char32_t(code);
}

}  // namespace shardscope::trace
