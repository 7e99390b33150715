// BytePairEncoder: a direct scan for short pieces (most words), a heap over a linked list for long
// ones (a run of a million spaces), both merging the lowest-ranked adjacent pair, leftmost first.
#include "data/tokenizer/byte_pair_encoder.hpp"

#include <algorithm>
#include <queue>

namespace dtrain {

namespace {

// Pieces up to this many bytes are merged by scanning all pairs each round (quadratic, but in a
// small stack array); longer ones by the heap.
constexpr size_t kShortPieceBytes = 128;

}  // namespace

BytePairEncoder::BytePairEncoder(BpeVocabulary vocabulary)
    : token_bytes_(std::move(vocabulary.token_bytes)), merges_(std::move(vocabulary.merges)) {
  byte_ids_.fill(kNoMerge);
  if (vocabulary.whole_piece_first) whole_pieces_.reserve(token_bytes_.size());
  for (size_t id = 0; id < token_bytes_.size(); ++id) {
    const std::string& bytes = token_bytes_[id];
    if (bytes.size() == 1 && byte_ids_[static_cast<unsigned char>(bytes[0])] == kNoMerge)
      byte_ids_[static_cast<unsigned char>(bytes[0])] = uint32_t(id);
    if (vocabulary.whole_piece_first && !bytes.empty()) whole_pieces_.insert(bytes, uint32_t(id));
  }
}

int BytePairEncoder::first_missing_byte() const {
  for (int b = 0; b < 256; ++b)
    if (byte_ids_[b] == kNoMerge) return b;
  return -1;
}

void BytePairEncoder::encode(std::string_view piece, std::vector<uint32_t>& out) const {
  if (piece.empty()) return;
  if (piece.size() == 1) {
    out.push_back(byte_ids_[static_cast<unsigned char>(piece[0])]);
    return;
  }
  if (whole_pieces_.size() > 0) {
    if (const int64_t whole = whole_pieces_.find(piece); whole != TokenIndex::kAbsent) {
      out.push_back(uint32_t(whole));
      return;
    }
  }
  if (piece.size() <= kShortPieceBytes) return merge_short_piece(piece, out);
  merge_long_piece(piece, out);
}

void BytePairEncoder::merge_short_piece(std::string_view piece, std::vector<uint32_t>& out) const {
  uint32_t ids[kShortPieceBytes];     // the tokens so far, in order
  PairMerge next[kShortPieceBytes];   // next[i]: the merge of ids[i] with ids[i + 1] (rank kNoMerge: none)
  size_t count = piece.size();
  for (size_t i = 0; i < count; ++i) ids[i] = byte_ids_[static_cast<unsigned char>(piece[i])];
  auto look_up = [&](size_t i) {
    const PairMerge* merge = merges_.find(ids[i], ids[i + 1]);
    next[i] = merge ? *merge : PairMerge{kNoMerge, 0};
  };
  for (size_t i = 0; i + 1 < count; ++i) look_up(i);
  while (count > 1) {
    size_t best = 0;
    for (size_t i = 1; i + 1 < count; ++i)
      if (next[i].rank < next[best].rank) best = i;
    if (next[best].rank == kNoMerge) break;
    ids[best] = next[best].merged_id;
    for (size_t i = best + 1; i + 1 < count; ++i) ids[i] = ids[i + 1];  // the right token leaves
    for (size_t i = best + 1; i + 2 < count; ++i) next[i] = next[i + 1];
    --count;
    if (best + 1 < count) look_up(best);
    if (best > 0) look_up(best - 1);
  }
  out.insert(out.end(), ids, ids + count);
}

void BytePairEncoder::merge_long_piece(std::string_view piece, std::vector<uint32_t>& out) const {
  // Each token is a node of a doubly linked list; a node that merges into its left neighbour dies.
  // The heap holds candidate merges by (rank, left node); a candidate whose two nodes have since
  // changed is stale and skipped. Left nodes keep their index when they grow, so the index order is
  // the text order and the smallest index is the leftmost.
  constexpr uint32_t kDead = ~uint32_t(0);
  constexpr uint32_t kNone = ~uint32_t(0);
  struct Node {
    uint32_t id, prev, next;
  };
  struct Candidate {
    uint32_t rank, left, left_id, right_id, merged_id;
    bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : left > o.left; }
  };
  const uint32_t n = uint32_t(piece.size());
  std::vector<Node> nodes(n);
  for (uint32_t i = 0; i < n; ++i)
    nodes[i] = {byte_ids_[static_cast<unsigned char>(piece[i])], i == 0 ? kNone : i - 1, i + 1 == n ? kNone : i + 1};
  std::vector<Candidate> storage;
  storage.reserve(n);
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> heap(std::greater<>(), std::move(storage));
  auto consider = [&](uint32_t left) {
    if (left == kNone || nodes[left].next == kNone) return;
    const uint32_t left_id = nodes[left].id, right_id = nodes[nodes[left].next].id;
    if (const PairMerge* merge = merges_.find(left_id, right_id))
      heap.push({merge->rank, left, left_id, right_id, merge->merged_id});
  };
  for (uint32_t i = 0; i + 1 < n; ++i) consider(i);
  while (!heap.empty()) {
    const Candidate c = heap.top();
    heap.pop();
    Node& left = nodes[c.left];
    if (left.id != c.left_id || left.next == kNone || nodes[left.next].id != c.right_id) continue;  // stale
    Node& right = nodes[left.next];
    left.id = c.merged_id;
    left.next = right.next;
    if (right.next != kNone) nodes[right.next].prev = c.left;
    right.id = kDead;
    consider(left.prev);
    consider(c.left);
  }
  for (uint32_t i = 0; i != kNone; i = nodes[i].next) out.push_back(nodes[i].id);
}

}  // namespace dtrain
