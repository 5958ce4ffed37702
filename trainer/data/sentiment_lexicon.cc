#include "trainer/data/sentiment_lexicon.h"

namespace ringmaster::trainer::sentiment {

const std::vector<sv> kMediaPos = {
    "gripping",  "witty",       "moving",      "clever",    "engaging",     "compelling",
    "heartfelt", "captivating", "thoughtful",  "hilarious", "entertaining", "funny",
    "touching",  "powerful",    "fascinating", "thrilling", "smart",        "original"};
const std::vector<sv> kMediaNeg = {"tedious",  "predictable", "lifeless",   "shallow",
                                   "flat",     "confusing",   "plodding",   "pretentious",
                                   "unfunny",  "cliched",     "repetitive", "forced",
                                   "soulless", "exhausting",  "derivative"};

const std::vector<Kind>& Kinds() {
  static const std::vector<Kind>* kinds = new std::vector<Kind>{
      {// screen
       {"movie", "film", "show", "series", "documentary", "sequel", "thriller", "comedy"},
       {{"plot", false},
        {"acting", false},
        {"dialogue", false},
        {"pacing", false},
        {"ending", false},
        {"soundtrack", false},
        {"script", false},
        {"cinematography", false},
        {"characters", true},
        {"performances", true},
        {"special effects", true},
        {"jokes", true},
        {"first half", false},
        {"final act", false}},
       kMediaPos,
       kMediaNeg,
       {"watchable", "tolerable", "passable", "coherent"},
       {"watch it again", "see it again", "sit through it again"},
       {"moment", "scene", "minute"},
       {"the plot follows a retired detective in a small town",
        "it is set in a seaside village in the seventies",
        "the lead actor also starred in a cooking show", "it runs just over two hours",
        "we saw it at the late showing", "it is based on a true story",
        "the theater was half empty", "it was filmed in iceland", "the director grew up in toronto",
        "I watched it on a long flight", "it premiered at a festival last year",
        "the main character is a nurse named rosa", "it came out in 2019", "it runs 135 minutes",
        "the story spans three decades"}},
      {// books
       {"book", "novel", "memoir", "biography", "short story collection"},
       {{"plot", false},
        {"prose", false},
        {"writing", false},
        {"ending", false},
        {"characters", true},
        {"dialogue", false},
        {"chapters", true},
        {"first chapter", false},
        {"pacing", false},
        {"translation", false}},
       kMediaPos,
       kMediaNeg,
       {"readable", "tolerable", "passable", "coherent"},
       {"read it again", "pick it up again", "open it again"},
       {"page", "chapter", "paragraph"},
       {"it is about four hundred pages long", "the author used to be a lawyer",
        "I read it on the train to work", "it follows three generations of a fishing family",
        "my book club picked it", "it is the second book in a trilogy",
        "I borrowed it from the library", "the story takes place in 1920s chicago",
        "the cover is bright yellow", "it was translated from korean"}},
      {// music
       {"album", "record", "mixtape", "debut album"},
       {{"songs", true},
        {"vocals", true},
        {"lyrics", true},
        {"production", false},
        {"opening track", false},
        {"guitar work", false},
        {"melodies", true},
        {"second half", false},
        {"mixing", false},
        {"drumming", false}},
       kMediaPos,
       kMediaNeg,
       {"listenable", "tolerable", "passable", "bearable"},
       {"listen to it again", "play it again", "put it on again"},
       {"song", "track", "chorus"},
       {"it has twelve tracks", "the band recorded it in a barn in vermont",
        "it came out on a friday in march", "the singer is from manchester",
        "I listened to it on my commute", "it is their third record", "it runs about forty minutes",
        "the drummer left the band last year", "the cover art is a photo of a parking lot"}},
      {// games
       {"game", "video game", "puzzle game", "board game", "shooter", "strategy game"},
       {{"controls", true},
        {"graphics", true},
        {"story", false},
        {"level design", false},
        {"combat", false},
        {"soundtrack", false},
        {"boss fights", true},
        {"multiplayer", false},
        {"tutorial", false},
        {"puzzles", true}},
       kMediaPos,
       kMediaNeg,
       {"playable", "tolerable", "passable", "functional"},
       {"play it again", "pick it up again", "start it again"},
       {"level", "mission", "minute"},
       {"it takes about thirty hours to finish", "the studio is based in poland",
        "I played it on my old laptop", "it has a ranked mode and a story mode",
        "it came out last november", "you play as a lighthouse keeper", "my nephew lent it to me",
        "it supports up to 4 players", "the sequel is already announced"}},
      {// restaurants
       {"restaurant", "cafe", "diner", "bistro", "bakery", "pizza place", "food truck"},
       {{"food", false},
        {"service", false},
        {"desserts", true},
        {"staff", false},
        {"atmosphere", false},
        {"menu", false},
        {"pasta", false},
        {"coffee", false},
        {"portions", true},
        {"soup", false},
        {"bread", false}},
       {"cozy", "welcoming", "friendly", "spotless", "affordable", "delicious"},
       {"dirty", "noisy", "cramped", "overpriced", "unfriendly", "greasy"},
       {"edible", "tolerable", "passable", "acceptable"},
       {"go back", "eat there again", "set foot in it again"},
       {"dish", "bite", "course"},
       {"it is near the train station", "we went there on a sunday night", "it opened last spring",
        "the owner is from naples", "we had a table by the window", "we ordered the set menu",
        "it used to be a bookstore", "there were six of us", "we booked it for 8 pm",
        "the kitchen is open until midnight"}},
      {// stage
       {"play", "musical", "opera", "production", "ballet"},
       {{"cast", false},
        {"songs", true},
        {"staging", false},
        {"set design", false},
        {"second act", false},
        {"dancing", false},
        {"costumes", true},
        {"script", false},
        {"lead actress", false},
        {"orchestra", false}},
       kMediaPos,
       kMediaNeg,
       {"watchable", "tolerable", "passable", "bearable"},
       {"see it again", "go again", "sit through it again"},
       {"scene", "number", "moment"},
       {"the theater was packed", "we had seats in the balcony", "it ran for almost three hours",
        "the lead actress is only nineteen", "it is set in a small town in the fifties",
        "we went for my mother's birthday", "the run ends in june",
        "there was a short intermission"}},
      {// podcasts
       {"podcast", "radio show", "audiobook"},
       {{"hosts", true},
        {"episodes", true},
        {"guests", true},
        {"interviews", true},
        {"sound quality", false},
        {"editing", false},
        {"research", false},
        {"narration", false}},
       kMediaPos,
       kMediaNeg,
       {"listenable", "tolerable", "passable", "bearable"},
       {"listen to it again", "download another episode", "put it on again"},
       {"episode", "minute", "segment"},
       {"each episode runs about an hour", "the hosts are two former teachers",
        "I listen to it while cooking", "it has over two hundred episodes",
        "a coworker sent me the link", "new episodes come out every tuesday"}},
  };
  return *kinds;
}

// Adjectives that fit both a whole item and its aspects, for every kind.
const std::vector<sv> kPos = {
    "good",     "great",      "wonderful",   "excellent", "brilliant",   "delightful",
    "charming", "enjoyable",  "fantastic",   "superb",    "memorable",   "impressive",
    "lovely",   "satisfying", "stunning",    "solid",     "refreshing",  "polished",
    "terrific", "pleasant",   "outstanding", "amazing",   "marvelous",   "beautiful",
    "fun",      "perfect",    "inventive",   "rewarding", "exceptional", "phenomenal"};
const std::vector<sv> kNeg = {
    "bad",         "terrible",      "awful",      "disappointing", "mediocre",   "forgettable",
    "messy",       "dreadful",      "horrible",   "lousy",         "weak",       "annoying",
    "pointless",   "sloppy",        "uninspired", "awkward",       "poor",       "unbearable",
    "frustrating", "underwhelming", "overrated",  "joyless",       "bland",      "tiresome",
    "dull",        "boring",        "clumsy",     "miserable",     "lackluster", "dismal",
    "atrocious"};

const std::vector<sv> kIntensifiers = {"really", "very",       "extremely", "incredibly",
                                       "truly",  "remarkably", "genuinely", "thoroughly",
                                       "quite",  "so",         "pretty",    "absolutely"};
// Diminishers soften without flipping: "slightly disappointing" is still negative. The words
// that sound natural differ by polarity ("fairly good", "a bit dull").
const std::vector<sv> kNegDiminishers = {"slightly", "somewhat", "a bit", "mildly", "a little"};
const std::vector<sv> kPosDiminishers = {"fairly", "reasonably", "somewhat", "mostly"};

const std::vector<sv> kOthers = {
    "my friend",     "my sister",      "my brother",    "my roommate",
    "my dad",        "my mom",         "my partner",    "my neighbor",
    "the critics",   "most reviewers", "my coworker",   "my best friend",
    "my wife",       "my husband",     "everyone else", "the guy next to me",
    "people online", "my cousin",      "my boss",       "my kids"};

// Past-tense opinions with the object included.
const std::vector<sv> kLikedIt = {"loved it", "enjoyed it",      "adored it",
                                  "liked it", "really liked it", "admired it"};
const std::vector<sv> kHatedIt = {"hated it",       "disliked it",        "despised it",
                                  "loathed it",     "could not stand it", "couldn't stand it",
                                  "was bored by it"};
// Infinitives for "never fails to ___".
const std::vector<sv> kPosEffect = {"amuse me",    "delight",       "impress", "entertain",
                                    "surprise me", "make me smile", "charm me"};
const std::vector<sv> kNegEffect = {"bore me",     "disappoint",      "annoy me",
                                    "irritate me", "put me to sleep", "test my patience"};

const std::vector<sv> kYes = {"yes",          "absolutely",      "definitely", "oh yes",
                              "very much so", "without a doubt", "you bet"};
const std::vector<sv> kNo = {"no",     "not at all", "not really", "not even close",
                             "hardly", "nope",       "far from it"};

const std::vector<sv> kGenericFacts = {"I went with my cousin",
                                       "a friend of mine told me about it",
                                       "it was a rainy weekend",
                                       "I had the day off",
                                       "it was cold and windy that night",
                                       "I went in knowing nothing about it",
                                       "I tried it on a whim",
                                       "it was my second time"};

}  // namespace ringmaster::trainer::sentiment
