#pragma once
#include <string>
#include <vector>

namespace rag {

// Ranks documents for a query.
class Retriever {
 public:
  explicit Retriever(std::vector<std::string> docs) : docs_(std::move(docs)) {}

  std::vector<int> search(const std::string& query, int k) const {
    std::vector<int> out;
    for (int i = 0; i < static_cast<int>(docs_.size()); ++i) {
      if (docs_[i].find(query) != std::string::npos) out.push_back(i);
    }
    if (static_cast<int>(out.size()) > k) out.resize(k);
    return out;
  }

  int size() const;

 private:
  std::vector<std::string> docs_;
};

template <typename T>
struct Pair {
  T first;
  T second;
};

}  // namespace rag

int rag::Retriever::size() const { return static_cast<int>(docs_.size()); }
