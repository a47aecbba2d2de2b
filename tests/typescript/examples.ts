// The README's minimal examples, as a TypeScript engine writes them against the types
// openapi-typescript generates from the published documents (default flags), with
// openapi-fetch. `tsc` compiling this file is the test (tests/test_typescript_client.py): the
// optional fields are optional, each game's state and action are typed, and the lines marked
// `@ts-expect-error` must not compile (a wrong state, action, payoff or problem type).
import createClient from "openapi-fetch";
import type { components as Doudizhu, paths as DoudizhuPaths } from "./generated/doudizhu";
import type { components as Leduc, paths as LeducPaths } from "./generated/leduc-holdem";
import type { components as Uno, paths as UnoPaths } from "./generated/uno";

type LeducState = Leduc["schemas"]["LeducHoldemState"];
type UnoState = Uno["schemas"]["UnoState"];
type DoudizhuState = Doudizhu["schemas"]["DoudizhuState"];

export async function leducHand(baseUrl: string): Promise<void> {
  const api = createClient<LeducPaths>({ baseUrl, headers: { Authorization: "Bearer KEY" } });

  // README, "The HTTP API in one minute": create (the minimal body, then with seats), decide, end.
  await api.POST("/v1/games", { body: { game: "leduc-holdem" } });
  const created = await api.POST("/v1/games", {
    body: { game: "leduc-holdem", seats: { "0": "learned", "1": "rules" } },
  });
  if (created.error) {
    throw new Error(created.error.detail.toString());
  }
  const gameId: string = created.data.game_id;
  const game_id = gameId;

  const state: LeducState = {
    hand: "SJ",
    public_card: null,
    all_chips: [2, 1],
    my_chips: 1,
    legal_actions: ["call", "raise", "fold"],
    current_player: 0,
  };
  const decided = await api.POST("/v1/games/{game_id}/decide", {
    params: { path: { game_id } },
    body: { seat: "0", state },
  });
  if (decided.data) {
    const action: "call" | "raise" | "fold" | "check" = decided.data.action;
    const index: number = decided.data.action_index;
    console.log(action, index, decided.data.fallback);
  } else if (decided.error?.type === "urn:croupier:problem:unknown-game") {
    return; // the game is gone: start another
  }
  await api.POST("/v1/games/{game_id}/end", {
    params: { path: { game_id } },
    body: { payoffs: { "0": 2.0, "1": -2.0 } },
  });

  // The batch forms, items without `turn` or `reward`.
  await api.POST("/v1/games:batch", { body: { games: [{ game: "leduc-holdem" }] } });
  const batch = await api.POST("/v1/decide:batch", {
    body: { items: [{ game_id, seat: "1", state }] },
  });
  for (const item of batch.data?.results ?? []) {
    if (item.outcome === "ok") {
      const action: LeducState["legal_actions"][number] = item.action;
      console.log(action);
    } else {
      console.log(item.error.type, item.error.errors?.[0]?.loc);
    }
  }
  await api.POST("/v1/end:batch", {
    body: { items: [{ game_id, payoffs: { "0": -1, "1": 1 } }] },
  });

  // The typed answers of /healthz and /v1/policies.
  const health = await api.GET("/healthz");
  const connected: boolean | undefined = health.data?.trainer_link?.connected;
  const policies = await api.GET("/v1/policies");
  const range: number[] | undefined = policies.data?.game.payoff_range;
  console.log(connected, range, health.error?.type === "urn:croupier:problem:starting");

  // What the types refuse.
  // @ts-expect-error: a state without the hand
  const noHand: LeducState = { public_card: null, all_chips: [2, 1], my_chips: 1, legal_actions: ["call"] };
  // @ts-expect-error: an action Leduc does not have
  const badAction: LeducState = { ...state, legal_actions: ["bet"] };
  await api.POST("/v1/games/{game_id}/end", {
    params: { path: { game_id } },
    // @ts-expect-error: a payoff for every seat
    body: { payoffs: { "0": 1 } },
  });
  if (decided.data) {
    // @ts-expect-error: a Leduc action is a name, not a number
    const asNumber: number = decided.data.action;
    console.log(asNumber);
  }
  // @ts-expect-error: not a problem type the server answers
  console.log(decided.error?.type === "urn:croupier:problem:no-such-problem", noHand, badAction);
}

export async function unoTurn(baseUrl: string, game_id: string): Promise<void> {
  const api = createClient<UnoPaths>({ baseUrl });
  await api.POST("/v1/games", { body: { game: "uno" } });
  const state: UnoState = {
    hand: ["b-4", "b-wild_draw_4", "b-7", "r-9", "y-1"],
    target: "y-0",
    played_cards: ["y-0"],
    legal_actions: ["y-1"],
    num_cards: [5, 7],
    num_players: 2,
    current_player: 0,
    color: "y",
    moves: [[1, "draw", "y"]],
  };
  const decided = await api.POST("/v1/games/{game_id}/decide", {
    params: { path: { game_id } },
    body: { seat: "0", state, reward: 0 },
  });
  console.log(decided.data?.action);
  // @ts-expect-error: a card UNO does not have
  const badCard: UnoState = { ...state, target: "p-0" };
  console.log(badCard);
}

export async function doudizhuTurn(baseUrl: string, game_id: string): Promise<void> {
  const api = createClient<DoudizhuPaths>({ baseUrl });
  await api.POST("/v1/games", { body: { game: "doudizhu", seats: { "0": "learned" } } });
  const state: DoudizhuState = {
    self: 0,
    landlord: 0,
    current_hand: "3344457899TJJQQKK2BR",
    others_hand: "334555666677788899TTTJJQQKKAAAA222",
    played_cards: ["", "", ""],
    num_cards_left: [20, 17, 17],
    trace: [],
    seen_cards: "457",
    legal_actions: ["pass", "33", "BR"],
  };
  const decided = await api.POST("/v1/games/{game_id}/decide", {
    params: { path: { game_id } },
    body: { seat: "0", state, turn: 1 },
  });
  const move: string | undefined = decided.data?.action;
  await api.POST("/v1/games/{game_id}/end", {
    params: { path: { game_id } },
    body: { payoffs: { "0": 1, "1": 0, "2": 0 } },
  });
  // @ts-expect-error: doudizhu has three seats
  const two: DoudizhuState = { ...state, played_cards: ["", ""] };
  console.log(move, two);
}
