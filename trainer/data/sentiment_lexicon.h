// The word lists and item kinds the generated sentiment grammar draws from
// (sentiment_gen.cc). Kept apart from the grammar so each file does one thing.
#pragma once

#include <string_view>
#include <vector>

namespace ringmaster::trainer::sentiment {

using sv = std::string_view;

struct Aspect {
  sv name;
  bool plural;
};

// One kind of thing being reviewed. Adjectives specific to a kind only describe the whole item
// ("a gripping film"), never an aspect ("the prices were gripping").
struct Kind {
  std::vector<sv> nouns;
  std::vector<Aspect> aspects;
  std::vector<sv> pos_extra;
  std::vector<sv> neg_extra;
  std::vector<sv> low_bar;  // faint praise: "barely watchable" is negative
  std::vector<sv> again;    // "I would never ___"
  std::vector<sv> units;    // "not a single dull ___"
  std::vector<sv> facts;    // neutral clauses
};

extern const std::vector<sv> kMediaPos;
extern const std::vector<sv> kMediaNeg;
extern const std::vector<sv> kPos;
extern const std::vector<sv> kNeg;
extern const std::vector<sv> kIntensifiers;
extern const std::vector<sv> kNegDiminishers;
extern const std::vector<sv> kPosDiminishers;
extern const std::vector<sv> kOthers;
extern const std::vector<sv> kLikedIt;
extern const std::vector<sv> kHatedIt;
extern const std::vector<sv> kPosEffect;
extern const std::vector<sv> kNegEffect;
extern const std::vector<sv> kYes;
extern const std::vector<sv> kNo;
extern const std::vector<sv> kGenericFacts;

// Every kind of reviewed item, with its nouns, aspects and kind-specific words.
const std::vector<Kind>& Kinds();

}  // namespace ringmaster::trainer::sentiment
