#include "trainer/data/sentiment_gen.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <initializer_list>
#include <random>
#include <set>
#include <string_view>
#include <unordered_set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/file_util.h"
#include "common/status_macros.h"
#include "common/user_output.h"
#include "trainer/data/sentiment_lexicon.h"

namespace ringmaster::trainer {
namespace {

using namespace sentiment;  // NOLINT: the grammar reads the lexicon throughout

// ---------------------------------------------------------------------------------------------
// Sampling. Everything goes through this class so the data set is identical on every standard
// library: std::mt19937_64's output is fixed by the standard, the distributions are not.

uint64_t SplitMix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

class Rng {
 public:
  explicit Rng(uint64_t seed) : engine_(SplitMix64(seed)) {}

  // Uniform in [0, n), by rejection of the 2^64 mod n smallest draws.
  size_t Below(size_t n) {
    const uint64_t bound = n;
    const uint64_t threshold = (0 - bound) % bound;
    for (;;) {
      uint64_t x = engine_();
      if (x >= threshold) return static_cast<size_t>(x % bound);
    }
  }
  bool Chance(double p) { return static_cast<double>(engine_() >> 11) * 0x1.0p-53 < p; }

  sv Pick(std::initializer_list<sv> options) { return options.begin()[Below(options.size())]; }
  template <typename T>
  const T& Pick(const std::vector<T>& options) {
    return options[Below(options.size())];
  }
  // Index drawn with the given relative weights.
  size_t Weighted(std::initializer_list<double> weights) {
    double total = 0;
    for (double w : weights) total += w;
    double x = static_cast<double>(engine_() >> 11) * 0x1.0p-53 * total;
    size_t i = 0;
    for (double w : weights) {
      if (x < w) return i;
      x -= w;
      ++i;
    }
    return weights.size() - 1;
  }
  template <typename T>
  void Shuffle(std::vector<T>& v) {
    for (size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[Below(i)]);
  }

 private:
  std::mt19937_64 engine_;
};

// Concatenation, called as Cat({{a, b, c}}): the parts of a braced list are evaluated left to
// right, while a function's arguments are evaluated in an unspecified order (GCC and Clang
// differ), and many parts draw from the Rng, whose order fixes the data set.
std::string Cat(std::initializer_list<sv> parts) {
  std::string out;
  for (sv p : parts) out.append(p);
  return out;
}

// ---------------------------------------------------------------------------------------------
// Grammar.

enum Pol { kNegative = 0, kPositive = 1 };

// Share of predicates stated through negation ("not bad" for positive). At 0.5 an adjective's
// own polarity would say nothing about the label; below that, plain statements keep some
// lexical signal, as in real reviews. Most of the word-count failure comes from the templates
// that use both polarities symmetrically (contrast, opinions, questions); unigram classifiers
// reach about 55-60% dev accuracy on the demo split (see sentiment_gen_test).
constexpr double kNegatedShare = 0.35;

Pol Flip(int p) { return p == kPositive ? kNegative : kPositive; }

bool StartsWithVowel(sv w) { return !w.empty() && sv("aeiou").find(w[0]) != sv::npos; }
std::string WithArticle(sv phrase) { return Cat({StartsWithVowel(phrase) ? "an " : "a ", phrase}); }

// How a predicate is negated. The contracted and "never" forms need a copula in front.
enum class Neg { kNot, kContracted, kNever, kFarFrom, kAnythingBut, kHardly, kNotVery };

// The state of one sentence being built: what it is about and its tense.
class Builder {
 public:
  explicit Builder(Rng& rng) : r_(rng), kind_(rng.Pick(Kinds())) {
    noun_ = r_.Pick(kind_.nouns);
    past_ = r_.Chance(0.7);
  }

  Rng& r() { return r_; }
  const Kind& kind() const { return kind_; }
  bool past() const { return past_; }

  // "the movie", "this new album", ...
  std::string Item() {
    switch (r_.Weighted({5, 3, 1, 1.5, 0.7})) {
      case 0:
        return Cat({"the ", noun_});
      case 1:
        return Cat({"this ", noun_});
      case 2:
        return Cat({"that ", noun_});
      case 3:
        return Cat({"the new ", noun_});
      default:
        return Cat({r_.Pick({"their latest ", "the much-hyped ", "the award-winning "}), noun_});
    }
  }
  sv Noun() const { return noun_; }

  const Aspect& PickAspect() { return r_.Pick(kind_.aspects); }
  // A different aspect than `other`.
  const Aspect& PickOtherAspect(const Aspect& other) {
    for (;;) {
      const Aspect& a = PickAspect();
      if (a.name != other.name) return a;
    }
  }

  sv Be(bool plural) const { return past_ ? (plural ? "were" : "was") : (plural ? "are" : "is"); }

  // An adjective of polarity `pol`; `whole_item` allows the kind-specific ones.
  sv Adj(int pol, bool whole_item) {
    const std::vector<sv>& base = pol == kPositive ? kPos : kNeg;
    const std::vector<sv>& extra = pol == kPositive ? kind_.pos_extra : kind_.neg_extra;
    if (whole_item && r_.Chance(0.45)) return r_.Pick(extra);
    return r_.Pick(base);
  }

  // A plain (unnegated) predicate meaning `pol`, maybe intensified or softened.
  std::string PlainPred(int pol, bool whole_item) {
    sv adj = Adj(pol, whole_item);
    size_t k = r_.Weighted({6, 3, 1});
    if (k == 1) return Cat({r_.Pick(kIntensifiers), " ", adj});
    if (k == 2) {
      return Cat({r_.Pick(pol == kPositive ? kPosDiminishers : kNegDiminishers), " ", adj});
    }
    return std::string(adj);
  }

  // A negated predicate meaning `pol`, built on an adjective of the opposite polarity. With
  // `with_copula`, the result includes the verb ("wasn't boring", "is never dull").
  std::string NegPred(int pol, bool whole_item, bool with_copula, bool plural) {
    sv adj = Adj(Flip(pol), whole_item);
    Neg form = with_copula
                   ? static_cast<Neg>(r_.Weighted({5, 4, 1.5, 1, 1, 1, 1}))
                   : std::array<Neg, 5>{Neg::kNot, Neg::kFarFrom, Neg::kAnythingBut, Neg::kHardly,
                                        Neg::kNotVery}[r_.Weighted({5, 1, 1, 1, 1})];
    std::string be = with_copula ? Cat({Be(plural), " "}) : "";
    sv at_all = r_.Chance(0.3) ? " at all" : "";
    switch (form) {
      case Neg::kNot:
        return Cat({be, "not ", adj, at_all});
      case Neg::kContracted:
        return Cat({Be(plural), "n't ", adj, at_all});
      case Neg::kNever:
        return Cat({be, "never ", adj});
      case Neg::kFarFrom:
        return Cat({be, "far from ", adj});
      case Neg::kAnythingBut:
        return Cat({be, "anything but ", adj});
      case Neg::kHardly:
        return Cat({be, "hardly ", adj});
      case Neg::kNotVery:
        // "not very good" is negative and "not that bad" positive, both natural.
        return Cat({be, "not ", pol == kPositive ? "that " : r_.Pick({"very ", "that "}), adj});
    }
    return "";
  }

  // "<subject> <copula> <predicate>" meaning `pol`, negated with probability kNegatedShare so
  // that the adjective's own polarity says little about the label.
  std::string Clause(const std::string& subject, bool plural, int pol, bool whole_item) {
    if (r_.Chance(kNegatedShare)) {
      return Cat({subject, " ", NegPred(pol, whole_item, true, plural)});
    }
    return Cat({subject, " ", Be(plural), " ", PlainPred(pol, whole_item)});
  }
  // A predicate without copula ("I found it ___").
  std::string BarePred(int pol, bool whole_item) {
    if (r_.Chance(kNegatedShare)) return NegPred(pol, whole_item, false, false);
    return PlainPred(pol, whole_item);
  }

  // A clause about the item or one of its aspects.
  std::string ItemClause(int pol) { return Clause(Item(), false, pol, true); }
  std::string AspectClause(const Aspect& a, int pol) {
    return Clause(Cat({"the ", a.name}), a.plural, pol, false);
  }

 private:
  Rng& r_;
  const Kind& kind_;
  sv noun_;
  bool past_;
};

// Each template returns the body of a review meaning `label`, without final punctuation (a
// trailing '?' is kept). `opener_ok` says whether an opener like "honestly," may precede it.
struct Core {
  std::string text;
  bool opener_ok = false;
};

Core Simple(Builder& b, int label) {
  Rng& r = b.r();
  switch (r.Weighted({6, 2, 1.5, 2})) {
    case 0:
      return {b.ItemClause(label), true};
    case 1:
      return {Cat({"I ", r.Pick({"found ", "considered "}), r.Chance(0.5) ? b.Item() : "it", " ",
                   b.BarePred(label, true)}),
              true};
    case 2:
      return {Cat({b.Item(), " ", r.Pick({"turned out to be ", "ended up being "}),
                   b.BarePred(label, true)}),
              true};
    default: {
      // Two aspects agreeing.
      const Aspect& a1 = b.PickAspect();
      const Aspect& a2 = b.PickOtherAspect(a1);
      return {Cat({b.AspectClause(a1, label), ", and ", b.AspectClause(a2, label)}), true};
    }
  }
}

Core Contrast(Builder& b, int label) {
  Rng& r = b.r();
  const int other = Flip(label);
  // Subjects of the conceded clause and of the clause that carries the verdict.
  std::string weak, strong;
  size_t subjects = r.Weighted({3, 2, 1});
  const Aspect& a1 = b.PickAspect();
  if (subjects == 0) {
    weak = b.AspectClause(a1, other);
    strong = b.Clause(r.Chance(0.5) ? std::string("it") : b.Item(), false, label, true);
  } else if (subjects == 1) {
    weak = b.AspectClause(a1, other);
    strong = b.AspectClause(b.PickOtherAspect(a1), label);
  } else {
    weak = b.ItemClause(other);
    strong = b.AspectClause(a1, label);
  }
  switch (r.Weighted({5, 1, 1.5, 2, 2, 1.5, 1, 2, 2})) {
    case 0:
      return {Cat({weak, ", but ", strong}), true};
    case 1:
      return {Cat({weak, ", yet ", strong}), true};
    case 2:
      return {Cat({weak, "; however, ", strong}), false};
    case 3:
      return {Cat({r.Pick({"although ", "even though ", "while "}), weak, ", ", strong}), true};
    case 4:
      // The main clause comes first and still wins: "the ending was wonderful, although ...".
      return {Cat({strong, ", ", r.Pick({"although ", "even though ", "though "}), weak}), true};
    case 5:
      return {Cat({"despite the ", b.Adj(other, false), " ", a1.name, ", ",
                   b.Clause(r.Chance(0.5) ? std::string("it") : b.Item(), false, label, true)}),
              true};
    case 6:
      return {Cat({"sure, ", weak, ", but ", strong}), false};
    case 7:
      // Same subject, two predicates: "good but boring" is negative.
      return {Cat({b.Item(), " ", b.Be(false), " ", b.PlainPred(other, true), " but ",
                   r.Pick({"", "ultimately ", "in the end "}), b.PlainPred(label, true)}),
              true};
    default:
      return {Cat({weak, ". ", r.Pick({"still, ", "even so, ", "but overall, "}), strong}), false};
  }
}

// Someone else's opposite opinion next to the writer's own.
Core Opinions(Builder& b, int label) {
  Rng& r = b.r();
  const int other = Flip(label);
  auto vp = [&](int pol) { return r.Pick(pol == kPositive ? kLikedIt : kHatedIt); };
  sv who = r.Pick(kOthers);
  switch (r.Weighted({3, 2, 1.5, 1.5, 1.5, 2, 2, 1})) {
    case 0:
      return {Cat({who, " ", vp(other), ", but I ", vp(label)}), false};
    case 1:
      return {Cat({who, " said it was ", b.BarePred(other, true), ", but I found it ",
                   b.BarePred(label, true)}),
              false};
    case 2:
      return {Cat({"unlike ", who, ", I ", vp(label)}), false};
    case 3:
      return {Cat({"I ", vp(label), ", even though ", who, " ", vp(other)}), false};
    case 4:
      return {Cat({who, " ", vp(other), ". ",
                   r.Pick({"I, on the other hand, ", "personally, I ", "me? I "}), vp(label)}),
              false};
    case 5: {
      // Whether the prediction came true decides: "they said it would be boring, and they were
      // wrong" is positive.
      int predicted = static_cast<int>(r.Below(2));
      bool right = predicted == label;
      return {
          Cat({r.Pick({"everyone said", "the reviews said", "people told me", "my friends said"}),
               " it would be ", b.Adj(predicted, true), ", and they were ",
               right ? r.Pick({"right", "absolutely right", "spot on"})
                     : r.Pick({"wrong", "completely wrong", "so wrong"})}),
          false};
    }
    case 6: {
      int expected = static_cast<int>(r.Below(2));
      bool was = expected == label;
      return {Cat({"I expected ", r.Chance(0.5) ? b.Item() : "it", " to be ", b.Adj(expected, true),
                   ", and it ",
                   was ? r.Pick({"was", "really was", "absolutely was"})
                       : r.Pick({"wasn't", "was not", "really wasn't"})}),
              false};
    }
    default:
      return {Cat({who, " called it ", b.Adj(other, true), ", but I ", vp(label)}), false};
  }
}

// Double negation and idioms whose words point the other way.
Core Idioms(Builder& b, int label) {
  Rng& r = b.r();
  const int other = Flip(label);
  switch (r.Weighted({label == kPositive ? 1.5 : 0, 2, 2, 2, 1.5, 1.5, 1.5, 1.5})) {
    case 0:
      return {Cat({b.Item(), " ", b.Be(false), " not without ",
                   r.Pick({"charm", "merit", "its charms", "heart", "wit", "its moments"})}),
              true};
    case 1:
      return {Cat({"there ", b.past() ? "was" : "is", " nothing ", b.Adj(other, true), " about ",
                   b.Item()}),
              true};
    case 2:
      return {
          Cat({r.Pick({"there was not a single ", "there wasn't a single ", "there is not one "}),
               b.Adj(other, false), " ", r.Pick(b.kind().units)}),
          true};
    case 3:
      return {Cat({r.Chance(0.5) ? b.Item() : "it", " never fails to ",
                   r.Pick(label == kPositive ? kPosEffect : kNegEffect)}),
              true};
    case 4:
      return {Cat({"I ", r.Pick({"can't", "cannot"}), " say I ",
                   r.Pick(other == kPositive ? kLikedIt : kHatedIt)}),
              true};
    case 5:
      return {Cat({"it is ", r.Pick({"impossible", "hard"}), " not to ",
                   label == kPositive ? r.Pick({"love", "enjoy", "admire"})
                                      : r.Pick({"hate", "be bored by", "feel cheated by"}),
                   " it"}),
              true};
    case 6:
      return {Cat({"I ", r.Pick({"did not ", "didn't "}),
                   label == kPositive ? r.Pick({"dislike", "hate", "regret"})
                                      : r.Pick({"like", "enjoy", "love"}),
                   " it"}),
              true};
    default:
      return {Cat({r.Pick({"nobody could call ", "no one would call ", "you could never call "}),
                   b.Item(), " ", b.Adj(other, true)}),
              true};
  }
}

Core Questions(Builder& b, int label) {
  Rng& r = b.r();
  int asked = static_cast<int>(r.Below(2));
  sv answer = asked == label ? r.Pick(kYes) : r.Pick(kNo);
  switch (r.Weighted({4, 1.5, 2, 1.5, 1.5})) {
    case 0: {
      std::string be = std::string(b.Be(false));
      return {Cat({be, " ", b.Item(), " ", b.Adj(asked, true), "? ", answer}), false};
    }
    case 1:
      return {Cat({"who knew ", WithArticle(b.Noun()), " could be ", r.Pick({"so ", "this "}),
                   b.Adj(label, true), "?"}),
              false};
    case 2:
      return {Cat({"did I ",
                   asked == kPositive ? r.Pick({"love", "enjoy", "like"})
                                      : r.Pick({"hate", "dislike", "regret"}),
                   " it? ", answer}),
              false};
    case 3:
      return {Cat({b.past() ? "was" : "is", " it worth ",
                   r.Pick({"the money", "your time", "the hype", "the wait"}), "? ",
                   label == kPositive ? r.Pick(kYes) : r.Pick(kNo)}),
              false};
    default:
      return {Cat({"why did ", r.Pick(kOthers), " say it was ", b.Adj(Flip(label), true),
                   "? it was ", b.BarePred(label, true)}),
              false};
  }
}

Core Quotes(Builder& b, int label) {
  Rng& r = b.r();
  const int other = Flip(label);
  switch (r.Weighted({2, 1.5, 1.5, 1.5})) {
    case 0:
      return {Cat({r.Pick(kOthers), " called it \"", b.Adj(other, true), "\", but I found it ",
                   b.BarePred(label, true)}),
              false};
    case 1:
      return {Cat({r.Pick({"my review in one word: \"", "in a word: \"", "one word: \""}),
                   b.Adj(label, true), "\""}),
              false};
    case 2:
      return {Cat({"\"", b.Adj(other, true), "\" is the last word I would use for ",
                   r.Chance(0.5) ? b.Item() : "it"}),
              false};
    default: {
      int quoted = static_cast<int>(r.Below(2));
      return {Cat({"one critic wrote \"", b.Adj(quoted, true), "\", and I ",
                   quoted == label
                       ? r.Pick({"agree", "could not agree more", "fully agree"})
                       : r.Pick({"disagree", "could not disagree more", "completely disagree"})}),
              false};
    }
  }
}

Core Intensity(Builder& b, int label) {
  Rng& r = b.r();
  switch (r.Weighted({label == kNegative ? 2.0 : 0.0, 2, 2, 1.5, 1.5})) {
    case 0:
      return {Cat({b.Item(), " ", b.Be(false), " ", r.Pick({"barely ", "only barely "}),
                   r.Pick(b.kind().low_bar)}),
              true};
    case 1:
      // "barely" cuts both ways, so the word alone says nothing.
      return {
          Cat({"I could barely ",
               label == kPositive
                   ? r.Pick({"contain my excitement", "stop smiling", "wait to tell my friends"})
                   : r.Pick({"stay awake", "sit through it", "finish it", "keep my eyes open"})}),
          true};
    case 2: {
      return {Cat({WithArticle(b.PlainPred(label, true)), " ", b.Noun()}), false};
    }
    case 3:
      return {Cat({"not ", WithArticle(b.Adj(Flip(label), true)), " ", b.Noun(),
                   r.Pick({"", " at all", " by any measure"})}),
              false};
    default:
      return {Cat({"what ", WithArticle(b.Adj(label, true)), " ", b.Noun(), "!"}), false};
  }
}

// ---------------------------------------------------------------------------------------------
// Surface: openers, neutral clauses, verdicts, casing and punctuation.

std::string Verdict(Builder& b, int label) {
  Rng& r = b.r();
  if (label == kPositive) {
    return std::string(
        r.Pick({"I would recommend it", "highly recommended", "I can't recommend it enough",
                "worth every penny", "worth it", "I would happily recommend it"}));
  }
  switch (r.Below(4)) {
    case 0:
      return Cat({"I would never ", r.Pick(b.kind().again)});
    default:
      return std::string(
          r.Pick({"I would not recommend it", "not recommended", "I can't recommend it",
                  "not worth the money", "not worth it", "I would not recommend it to anyone"}));
  }
}

std::string Fact(Builder& b) {
  Rng& r = b.r();
  return std::string(r.Chance(0.75) ? r.Pick(b.kind().facts) : r.Pick(kGenericFacts));
}

// Upper-cases the first letter of each sentence ("I" is generated upper-case already).
std::string NaturalCase(std::string s) {
  bool start = true;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (std::isalpha(static_cast<unsigned char>(c))) {
      if (start) s[i] = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
      start = false;
    } else if (c == '.' || c == '?' || c == '!') {
      start = true;
    }
  }
  return s;
}

std::string Finish(Builder& b, Core core, int label) {
  Rng& r = b.r();
  std::string text = std::move(core.text);
  if (core.opener_ok && r.Chance(0.3)) {
    text = Cat({r.Pick({"honestly, ", "overall, ", "to be honest, ", "in the end, ", "all in all, ",
                        "I have to say ", "I think ", "in my opinion, ", "frankly, ", "well, ",
                        b.past() ? "I thought " : "I feel "}),
                text});
  }
  const bool ends_question = !text.empty() && (text.back() == '?' || text.back() == '!');
  // Neutral facts carry no label information; they make position and length uninformative.
  if (r.Chance(0.35)) {
    std::string fact = Fact(b);
    if (ends_question || r.Chance(0.5)) {
      // Only a plain clause can hang off ", and" ("it rained, and was it good?" cannot).
      const bool has_question = text.find('?') != std::string::npos;
      const bool joinable = core.opener_ok && !has_question;
      text = Cat({fact, joinable ? r.Pick({". ", ". ", "; ", ", and "}) : ". ", text});
    } else {
      text = Cat({text, r.Pick({". ", ". ", " - "}), fact});
    }
  }
  if (!ends_question && r.Chance(0.15))
    text = Cat({text, r.Pick({". ", "! ", "; "}), Verdict(b, label)});
  if (r.Chance(0.12)) text.erase(std::remove(text.begin(), text.end(), ','), text.end());

  if (text.back() != '?' && text.back() != '!') {
    text += r.Pick({".", ".", ".", ".", ".", "!", "!", "", "", "...", "!!", " ."});
  }
  switch (r.Weighted({70, 20, 5, 3})) {
    case 0:
      return NaturalCase(text);
    case 1:
      // Typed in a hurry: all lower case, "i" included.
      std::transform(text.begin(), text.end(), text.begin(),
                     [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
      return text;
    case 2: {
      // One shouted word.
      text = NaturalCase(text);
      std::vector<size_t> starts;
      for (size_t i = 0; i < text.size(); ++i) {
        if (std::isalpha(static_cast<unsigned char>(text[i])) && (i == 0 || text[i - 1] == ' ')) {
          starts.push_back(i);
        }
      }
      for (size_t i = starts[r.Below(starts.size())];
           i < text.size() && std::isalpha(static_cast<unsigned char>(text[i])); ++i) {
        text[i] = static_cast<char>(std::toupper(static_cast<unsigned char>(text[i])));
      }
      return text;
    }
    default:
      std::transform(text.begin(), text.end(), text.begin(),
                     [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
      return text;
  }
}

std::string Sentence(Rng& r, int label) {
  Builder b(r);
  Core core;
  switch (r.Weighted({5, 5, 4, 2.5, 2.5, 1.5, 2})) {
    case 0:
      core = Simple(b, label);
      break;
    case 1:
      core = Contrast(b, label);
      break;
    case 2:
      core = Opinions(b, label);
      break;
    case 3:
      core = Idioms(b, label);
      break;
    case 4:
      core = Questions(b, label);
      break;
    case 5:
      core = Quotes(b, label);
      break;
    default:
      core = Intensity(b, label);
      break;
  }
  return Finish(b, std::move(core), label);
}

// Case- and punctuation-insensitive identity, so "Great film!" and "great film." count as the
// same sentence for the train/dev split.
std::string DedupKey(const std::string& s) {
  std::string key;
  for (unsigned char c : s) {
    if (std::isalnum(c)) {
      key += static_cast<char>(std::tolower(c));
    } else if (c == ' ' && !key.empty() && key.back() != ' ') {
      key += ' ';
    }
  }
  while (!key.empty() && key.back() == ' ') key.pop_back();
  return key;
}

void GenerateSplit(Rng& r, int n, std::unordered_set<std::string>& seen,
                   std::vector<std::string>& sentences, std::vector<int>& labels) {
  n = std::max(n, 0);
  std::vector<int> wanted(static_cast<size_t>(n), kPositive);
  std::fill(wanted.begin(), wanted.begin() + n / 2, kNegative);
  r.Shuffle(wanted);
  sentences.reserve(wanted.size());
  labels.reserve(wanted.size());
  for (int label : wanted) {
    // The grammar has millions of sentences, so a handful of retries always finds a new one;
    // the bound only keeps a pathological request from looping forever (the slot is dropped).
    for (int attempt = 0; attempt < 10000; ++attempt) {
      std::string s = Sentence(r, label);
      if (seen.insert(DedupKey(s)).second) {
        sentences.push_back(std::move(s));
        labels.push_back(label);
        break;
      }
    }
  }
}

bool IsPunct(unsigned char c) { return std::ispunct(c) != 0; }

// BERT's basic tokenization for ASCII text: lower-case, split on spaces, every punctuation
// character its own token.
void CollectTokens(const std::string& s, std::set<std::string>& words, std::set<char>& punct) {
  std::string cur;
  for (unsigned char c : s) {
    if (std::isspace(c) || IsPunct(c)) {
      if (!cur.empty()) words.insert(cur);
      cur.clear();
      if (IsPunct(c)) punct.insert(static_cast<char>(c));
    } else {
      cur += static_cast<char>(std::tolower(c));
    }
  }
  if (!cur.empty()) words.insert(cur);
}

std::string BuildVocab(const GeneratedDataset& d) {
  std::set<std::string> words;
  std::set<char> punct;
  for (const auto* split : {&d.train_sentences, &d.dev_sentences}) {
    for (const std::string& s : *split) CollectTokens(s, words, punct);
  }
  std::vector<std::string> entries = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};
  for (char c : punct) entries.emplace_back(1, c);
  entries.insert(entries.end(), words.begin(), words.end());
  // Fallback pieces so that words outside the generated data (a user's own test sentence)
  // still tokenize, letter by letter.
  for (char c = 'a'; c <= 'z'; ++c) entries.emplace_back(1, c);
  for (char c = 'a'; c <= 'z'; ++c) entries.push_back(Cat({"##", std::string(1, c)}));
  for (char c = '0'; c <= '9'; ++c) entries.emplace_back(1, c);
  for (char c = '0'; c <= '9'; ++c) entries.push_back(Cat({"##", std::string(1, c)}));
  std::string out;
  std::unordered_set<std::string> added;
  for (const std::string& e : entries) {
    if (added.insert(e).second) out += Cat({e, "\n"});
  }
  return out;
}

absl::StatusOr<std::string> ToTsv(const std::vector<std::string>& sentences,
                                  const std::vector<int>& labels) {
  std::string out = "sentence\tlabel\n";
  for (size_t i = 0; i < sentences.size(); ++i) {
    if (sentences[i].find_first_of("\t\r\n") != std::string::npos) {
      return absl::InternalError(
          absl::StrCat("generated sentence has a tab or newline: ", sentences[i]));
    }
    out += Cat({sentences[i], "\t", std::to_string(labels[i]), "\n"});
  }
  return out;
}

}  // namespace

GeneratedDataset GenerateSentimentDataset(uint64_t seed, int num_train, int num_dev) {
  Rng r(seed);
  GeneratedDataset d;
  std::unordered_set<std::string> seen;
  GenerateSplit(r, num_train, seen, d.train_sentences, d.train_labels);
  GenerateSplit(r, num_dev, seen, d.dev_sentences, d.dev_labels);
  return d;
}

absl::Status WriteSentimentDataset(const std::string& dir, uint64_t seed, int num_train,
                                   int num_dev) {
  GeneratedDataset d = GenerateSentimentDataset(seed, num_train, num_dev);
  RM_RETURN_IF_ERROR(MakeDirs(dir));
  RM_ASSIGN_OR_RETURN(std::string train, ToTsv(d.train_sentences, d.train_labels));
  RM_ASSIGN_OR_RETURN(std::string dev, ToTsv(d.dev_sentences, d.dev_labels));
  // The user names the directory: a FIFO or device placed there is written in place (#33).
  RM_RETURN_IF_ERROR(WriteUserOutput(dir + "/train.tsv", train));
  RM_RETURN_IF_ERROR(WriteUserOutput(dir + "/dev.tsv", dev));
  RM_RETURN_IF_ERROR(WriteUserOutput(dir + "/vocab.txt", BuildVocab(d)));
  return absl::OkStatus();
}

}  // namespace ringmaster::trainer
