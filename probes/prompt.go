package probes

import (
	"hash/fnv"
	"math/rand/v2"
	"strings"

	"github.com/vllm-exporter/vllm_exporter/internal/config"
)

// words is the vocabulary chat prompts are built from: short, common English
// words that most tokenizers encode as one token each with a leading space.
// Chat prompt length is therefore approximate (the chat template adds more);
// only completions prompts, sent as token IDs, are exact.
var words = strings.Fields(`the of and to in is it you that he was for on are with as his they be at
one have this from or had by hot word but what some we can out other were all there when up use your how
said an each she which do their time if will way about many then them write would like so these her long
make thing see him two has look more day could go come did number sound no most people my over know water
than call first who may down side been now find any new work part take get place made live where after
back little only round man year came show every good me give our under name very through just form great
think say help low line differ turn cause much mean before move right boy old too same tell does set three
want air well also play small end put home read hand port large spell add even land here must big high
such follow act why ask men change went light kind off need house picture try us again animal point mother
world near build self earth father head stand own page should country found answer school grow study still
learn plant cover food sun four between state keep eye never last let thought city tree cross farm hard
start might story saw far sea draw left late run while press close night real life few north open seem
together next white children begin got walk example ease paper group always music those both mark often`)

// prompter builds probe prompts. Cold prompts are random from the first
// token, so no block can hit the prefix cache; warm prompts start with a
// fixed prefix (derived from the profile name, identical across restarts and
// exporter replicas) followed by random tokens.
type prompter struct {
	rng          *rand.Rand
	idMin, idMax int
}

func profileSeed(name string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(name))
	return h.Sum64()
}

// picks draws one index in [0, n) per input token: from the profile's
// fixed sequence within the warm prefix, at random after it.
func (p *prompter) picks(pr *config.ProbeProfile, n int) []int {
	warm := pr.WarmPrefix()
	fixed := rand.New(rand.NewPCG(profileSeed(pr.Name), 0x70726f6265))
	out := make([]int, pr.InputTokens)
	for i := range out {
		r := p.rng
		if i < warm {
			r = fixed
		}
		out[i] = r.IntN(n)
	}
	return out
}

// tokens returns the token-ID prompt for a completions probe.
func (p *prompter) tokens(pr *config.ProbeProfile) []int {
	out := p.picks(pr, p.idMax-p.idMin)
	for i := range out {
		out[i] += p.idMin
	}
	return out
}

// text returns the chat message for a chat probe: InputTokens words.
func (p *prompter) text(pr *config.ProbeProfile) string {
	ws := make([]string, pr.InputTokens)
	for i, k := range p.picks(pr, len(words)) {
		ws[i] = words[k]
	}
	return strings.Join(ws, " ")
}
