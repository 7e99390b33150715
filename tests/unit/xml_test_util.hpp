// Test helpers for the HTML and SVG the reports write: counting a substring, and whether every tag
// is closed in order (the pages are well-formed XML, so a parser of either reads them).
#pragma once
#include <string>
#include <vector>

inline size_t count_of(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + what.size())) ++n;
  return n;
}

// "" when every tag of `xml` is closed in order (and no text holds a bare '&'), else the problem.
inline std::string balance_problem(const std::string& xml) {
  std::vector<std::string> open;
  size_t at = 0;
  while (true) {
    const size_t lt = xml.find('<', at);
    const std::string text = xml.substr(at, lt == std::string::npos ? std::string::npos : lt - at);
    for (size_t amp = text.find('&'); amp != std::string::npos; amp = text.find('&', amp + 1)) {
      const size_t semi = text.find(';', amp);
      if (semi == std::string::npos || semi - amp > 6) return "a bare & in text: " + text;
    }
    if (lt == std::string::npos) break;
    const size_t gt = xml.find('>', lt);
    if (gt == std::string::npos) return "an unclosed tag at " + std::to_string(lt);
    const std::string tag = xml.substr(lt + 1, gt - lt - 1);
    if (tag.find('<') != std::string::npos) return "a '<' inside tag " + tag;
    at = gt + 1;
    if (tag.empty() || tag[0] == '!' || tag[0] == '?') continue;
    if (tag[0] == '/') {
      const std::string name = tag.substr(1);
      if (open.empty() || open.back() != name) return "</" + name + "> closes " + (open.empty() ? "nothing" : open.back());
      open.pop_back();
    } else if (tag.back() != '/') {
      open.push_back(tag.substr(0, tag.find_first_of(" \n")));
    }
  }
  return open.empty() ? "" : "<" + open.back() + "> is never closed";
}
