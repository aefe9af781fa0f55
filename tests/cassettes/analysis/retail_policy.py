"""A tau-bench-retail-like agent for the agent's rules (docs/rules.md): the real openai SDK, tools
that answer from fixed data, and a scripted model (one script per conversation) that keeps the
policy — authenticate (by email, or by name and zip) before any account tool, look an order up
before changing it, the user's explicit yes before a write, at most one item change per order, no
address change after the items changed, one write at a time — in 20 passing conversations, and
breaks it once, at a known turn, in each of 10 failing ones.

``AGENT`` is the agent (run by ``looptap run``, one conversation per argument: the user's messages
joined by `` || ``), its loop :data:`LOOP`, which :func:`agent` puts after another agent's tools
(tests/cassettes/analysis/test_labels_recorded.py's); ``PASSING`` and ``FAILING`` the scripts,
keyed by the first user message; ``PLANTED`` the turn and the rule kind of each failing
conversation's break; :func:`route` the scripted model.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tests.support.scripted import Call, Reply, ScriptedRequest

LOOP = r"""
client = OpenAI(max_retries=0)
for question in sys.argv[1:]:
    first, *replies = question.split(" || ")  # the user's later messages, one per answer
    msgs = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": first}]
    try:
        for _ in range(BOUND):
            m = client.chat.completions.create(
                model="gpt-4o", messages=msgs, tools=TOOLS).choices[0].message
            if not m.tool_calls:
                print("answer:", m.content)
                if not replies:
                    break
                msgs += [{"role": "assistant", "content": m.content},
                         {"role": "user", "content": replies.pop(0)}]
                continue
            msgs.append({"role": "assistant", "content": m.content, "tool_calls": [
                {"id": c.id, "type": "function", "function": {
                    "name": c.function.name, "arguments": c.function.arguments}}
                for c in m.tool_calls]})
            msgs += [{"role": "tool", "tool_call_id": c.id,
                      "content": run_tool(c.function.name, json.loads(c.function.arguments))}
                     for c in m.tool_calls]
    except openai.BadRequestError as exc:
        if not REFUSALS:
            raise
        print("refused:", exc.status_code)
"""


def agent(tools: str, system: str, bound: int, refusals: bool = False) -> str:
    """An agent's source: ``tools`` (Python defining ``TOOLS`` and ``run_tool(name, args)``),
    then the loop — per argument (the user's messages joined by `` || ``), the model called
    until it answers without a call (at most ``bound`` times), each call's result sent back, the
    user's next message after each answer; a 400 is printed as ``refused: 400`` where
    ``refusals`` (else it ends the agent)."""
    head = f"import json, sys\nimport openai\nfrom openai import OpenAI\n{tools}\n"
    consts = f"SYSTEM, BOUND, REFUSALS = {system!r}, {bound}, {refusals}\n"
    return head + consts + LOOP


AGENT = agent(
    r"""
def fn(name, **props):
    return {"type": "function", "function": {"name": name, "parameters": {
        "type": "object", "properties": {k: {"type": v} for k, v in props.items()}}}}

TOOLS = [fn("find_user_id_by_email", email="string"),
         fn("find_user_id_by_name_zip", first_name="string", last_name="string", zip="string"),
         fn("get_user_details", user_id="string"), fn("get_order_details", order_id="string"),
         fn("cancel_pending_order", order_id="string", reason="string"),
         fn("modify_pending_order_items", order_id="string", item_ids="array",
            new_item_ids="array", payment_method_id="string"),
         fn("modify_pending_order_address", order_id="string", address1="string",
            city="string", zip="string")]
USERS = {
    "ana_silva_4821": ("ana.silva@mail.test", "Ana", "Silva", "10001", ["W101", "W102"],
                       ["credit_card_1187", "gift_card_5530"]),
    "ben_okafor_7310": ("ben.okafor@mail.test", "Ben", "Okafor", "94110", ["W201", "W202"],
                        ["paypal_2290"]),
    "chen_li_1942": ("chen.li@mail.test", "Chen", "Li", "60601", ["W301", "W302"],
                     ["credit_card_3371"]),
    "dara_moss_6604": ("dara.moss@mail.test", "Dara", "Moss", "73301", ["W401", "W402"],
                       ["gift_card_4415", "credit_card_4468"]),
}

def run_tool(name, a):
    if name == "find_user_id_by_email":
        for uid, u in USERS.items():
            if u[0] == a.get("email"):
                return uid
        return "Error: user not found"
    if name == "find_user_id_by_name_zip":
        for uid, u in USERS.items():
            if u[1:4] == (a.get("first_name"), a.get("last_name"), a.get("zip")):
                return uid
        return "Error: user not found"
    if name == "get_user_details":
        u = USERS.get(a.get("user_id"))
        if u is None:
            return "Error: user not found"
        return json.dumps({"user_id": a["user_id"], "name": u[1] + " " + u[2], "email": u[0],
                           "orders": u[4], "payment_methods": u[5]})
    oid = a.get("order_id", "")
    if not any(oid in u[4] for u in USERS.values()):
        return "Error: order not found"
    if name == "get_order_details":
        n = oid[1:]
        return json.dumps({"order_id": oid, "status": "pending", "items": [
            {"item_id": "I" + n + "1", "name": "kettle"},
            {"item_id": "I" + n + "2", "name": "lamp"}]})
    return json.dumps({"order_id": oid, "done": name, **a})
""",
    "You are a retail agent. Follow the policy.",
    30,
)

#: (email, first name, last name, zip, orders, payment methods) by user id, as the agent has them.
USERS = {
    "ana_silva_4821": ("ana.silva@mail.test", "Ana", "Silva", "10001", ("credit_card_1187",)),
    "ben_okafor_7310": ("ben.okafor@mail.test", "Ben", "Okafor", "94110", ("paypal_2290",)),
    "chen_li_1942": ("chen.li@mail.test", "Chen", "Li", "60601", ("credit_card_3371",)),
    "dara_moss_6604": ("dara.moss@mail.test", "Dara", "Moss", "73301", ("gift_card_4415",)),
}
ORDERS = {"W101": "ana", "W102": "ana", "W201": "ben", "W202": "ben", "W301": "chen",
          "W302": "chen", "W401": "dara", "W402": "dara"}  # fmt: skip


@dataclass
class Script:
    """One conversation: the user's messages and the model's replies, in order."""

    said: list[str]
    replies: list[Reply] = field(default_factory=list)
    #: For a failing conversation: the turn of the planted break and the kind of rule it breaks.
    planted: tuple[int, str] | None = None

    def turn(self, *replies: Reply) -> Script:
        self.replies += replies
        return self

    def ask(self, question: str, user: str) -> Script:
        """The model asks, the user answers (the next task starts)."""
        self.replies.append(Reply.say(question))
        self.said.append(user)
        return self

    def plant(self, kind: str) -> Script:
        """The next reply breaks a rule of ``kind``."""
        self.planted = (len(self.replies), kind)
        return self


def _user(name: str) -> tuple[str, tuple[str, str, str, str, tuple[str, ...]]]:
    return next((uid, u) for uid, u in USERS.items() if u[1].lower() == name)


def start(name: str, ask: str, by: str = "email") -> Script:
    """A conversation that opens with the user's request and authenticates them."""
    uid, (email, first, last, zip_, _) = _user(name)
    if by == "email":
        s = Script([f"Hi, I am {email}. {ask}"])
        s.turn(Reply.tool("find_user_id_by_email", {"email": email}))
    else:
        s = Script([f"Hi, I am {first} {last}, zip {zip_}. {ask}"])
        if by == "typo":  # the email lookup fails first, then name and zip
            s.said[0] = f"Hi, I am {email.replace('.', '', 1)} ({first} {last}, {zip_}). {ask}"
            s.turn(Reply.tool("find_user_id_by_email", {"email": email.replace(".", "", 1)}))
        s.turn(Reply.tool("find_user_id_by_name_zip",
                          {"first_name": first, "last_name": last, "zip": zip_}))  # fmt: skip
    return s.turn(Reply.tool("get_user_details", {"user_id": uid}))


def lookup(s: Script, *orders: str) -> Script:
    return s.turn(Reply(calls=tuple(Call("get_order_details", {"order_id": o}) for o in orders)))


def cancel(o: str) -> Call:
    return Call("cancel_pending_order", {"order_id": o, "reason": "no longer needed"})


def items(o: str, pay: str, new: str = "N5501") -> Call:
    return Call(
        "modify_pending_order_items",
        {
            "order_id": o,
            "item_ids": [f"I{o[1:]}1"],
            "new_item_ids": [new],
            "payment_method_id": pay,
        },
    )


def address(o: str) -> Call:
    return Call(
        "modify_pending_order_address",
        {"order_id": o, "address1": "12 Elm St", "city": "Springfield", "zip": "01101"},
    )


def write(
    s: Script, call: Call, yes: str = "Yes, go ahead.", looked: bool = True, done: bool = True
) -> Script:
    """Look the order up (unless ``looked``: already), ask, hear the user, make the call, and
    (``done``) report it."""
    o = call.arguments["order_id"] if isinstance(call.arguments, dict) else ""
    if not looked:
        lookup(s, o)
    s.ask(f"Order {o} is pending. Shall I do {call.name} now?", yes)
    s.turn(Reply(calls=(call,)))
    return s.turn(Reply.say("Done. Anything else?")) if done else s


def next_task(s: Script, text: str) -> Script:
    """The user's next request, in answer to the last report."""
    s.said.append(text)
    return s


ANA, BEN, CHEN, DARA = (USERS[u][4][0] for u in USERS)


def passing() -> list[Script]:
    out = [
        write(start("ana", "Please cancel order W101."), cancel("W101"), looked=False),
        write(start("ben", "Please cancel order W201.", "name"), cancel("W201"), looked=False),
        write(
            start("chen", "Swap the kettle in W301 for item N5501."),
            items("W301", CHEN),
            looked=False,
        ),
        write(
            start("dara", "Swap the kettle in W401 for N7702.", "name"),
            items("W401", DARA, "N7702"),
            looked=False,
        ),
        write(
            start("ana", "Ship W102 to 12 Elm St, Springfield 01101."),
            address("W102"),
            looked=False,
        ),
    ]
    for who, o, pay, by in (("ben", "W202", BEN, "email"), ("chen", "W302", CHEN, "name"),
                            ("dara", "W402", DARA, "email")):  # fmt: skip
        s = write(
            start(who, f"Ship {o} to 12 Elm St, Springfield 01101.", by), address(o), looked=False
        )
        out.append(
            write(
                next_task(s, f"Also swap the kettle in {o} for N5501."), items(o, pay), looked=False
            )
        )
    s = write(start("ana", "Cancel W101 please."), cancel("W101"), looked=False)
    out.append(write(next_task(s, "And cancel W102 too."), cancel("W102"), looked=False))
    s = write(
        start("ana", "Swap the kettle in W101 for N5501.", "name"), items("W101", ANA), looked=False
    )
    out.append(
        write(next_task(s, "And the kettle in W102 as well."), items("W102", ANA), looked=False)
    )
    out.append(
        write(
            lookup(start("ben", "Which of W201 and W202 is pending? Cancel W202."), "W201", "W202"),
            cancel("W202"),
        )
    )
    out.append(write(start("chen", "Cancel W301, please.", "typo"), cancel("W301"), looked=False))
    s = write(
        start("dara", "Swap the kettle in W401 for N5501."), items("W401", DARA), looked=False
    )
    out.append(
        write(
            next_task(s, "And ship W402 to 12 Elm St, Springfield 01101."),
            address("W402"),
            looked=False,
        )
    )
    out.append(
        write(
            lookup(
                start("ana", "Check W101 and W102; swap the kettle in W102.", "name"),
                "W101",
                "W102",
            ),
            items("W102", ANA),
        )
    )
    out.append(write(start("ben", "Cancel W201."), cancel("W201"), looked=False))
    out.append(
        write(
            start("chen", "Swap the kettle in W302 for N5501.", "name"),
            items("W302", CHEN),
            looked=False,
        )
    )
    out.append(
        write(
            start("dara", "Ship W401 to 12 Elm St, Springfield 01101."),
            address("W401"),
            looked=False,
        )
    )
    out.append(
        write(
            start("ben", "Swap the kettle in W202 for N5501.", "typo"),
            items("W202", BEN),
            looked=False,
        )
    )
    out.append(
        write(
            lookup(
                start("chen", "Look at W301 and W302; ship W301 to my new place."), "W301", "W302"
            ),
            address("W301"),
        )
    )
    out.append(write(start("dara", "Cancel W402.", "name"), cancel("W402"), looked=False))
    return out


def failing() -> list[Script]:
    out = []
    # a write without the user's yes: made at once, then after a question the user did not answer
    s = lookup(start("ana", "I might cancel W101, what is its status?"), "W101")
    out.append(s.plant("consent").turn(Reply(calls=(cancel("W101"),)), Reply.say("Cancelled.")))
    s = lookup(start("chen", "Could W302 get another kettle?", "name"), "W302")
    s.ask("Swap the kettle in W302 for N5501?", "Hmm, what colours does N5501 come in?")
    out.append(s.plant("consent").turn(Reply(calls=(items("W302", CHEN),)), Reply.say("Done.")))
    # a write without looking its order up (another order was)
    s = lookup(start("ana", "Ship W102 to 12 Elm St, Springfield 01101; W101 too?"), "W101")
    s.ask("Shall I change the address of W102?", "Yes, go ahead.")
    out.append(s.plant("order").turn(Reply(calls=(address("W102"),)), Reply.say("Done.")))
    # an account tool before the user is authenticated
    s = Script(["Cancel order W201 now."]).plant("order")
    lookup(s, "W201").ask("Cancel W201?", "Yes, go ahead.")
    out.append(s.turn(Reply(calls=(cancel("W201"),)), Reply.say("Cancelled.")))
    # a second item change of one order: in the same task, and two user turns apart
    s = write(
        start("chen", "Swap both items in W301 for N5501.", "name"),
        items("W301", CHEN),
        looked=False,
        done=False,
    )
    out.append(s.plant("count").turn(Reply(calls=(items("W301", CHEN),)), Reply.say("Done.")))
    s = write(
        start("dara", "Please swap the kettle in W401 for N5501."),
        items("W401", DARA),
        looked=False,
    )
    s = next_task(s, "Thanks. Oh, and swap the lamp in W401 too.")
    s.ask("The lamp of W401 for N5501, shall I?", "Yes, go ahead.")
    out.append(s.plant("count").turn(Reply(calls=(items("W401", DARA),)), Reply.say("Done.")))
    # an address change after the items changed
    s = write(start("ben", "Swap the kettle in W202 for N5501."), items("W202", BEN), looked=False)
    s = next_task(s, "Now ship W202 to 12 Elm St, Springfield 01101.")
    s.ask("Change the address of W202?", "Yes, go ahead.")
    out.append(s.plant("forbidden").turn(Reply(calls=(address("W202"),)), Reply.say("Done.")))
    # two writes in one answer
    s = lookup(
        start("ana", "Cancel W101 and ship W102 to 12 Elm St, Springfield 01101."), "W101", "W102"
    )
    s.ask("Cancel W101 and change the address of W102?", "Yes, go ahead.")
    out.append(
        s.plant("forbidden").turn(
            Reply(calls=(cancel("W101"), address("W102"))), Reply.say("Both done.")
        )
    )
    # an invented payment method
    s = lookup(
        start("dara", "Swap the kettle in W402 for N5501, pay with my card.", "name"), "W402"
    )
    s.ask("Swap the kettle in W402 for N5501?", "Yes, go ahead.")
    out.append(
        s.plant("provenance").turn(
            Reply(calls=(items("W402", "credit_card_9999"),)), Reply.say("Done.")
        )
    )
    # a failed authentication taken for a success
    s = Script(["Hi, I am bob.okafor@mail.test, cancel W201."])
    s.turn(Reply.tool("find_user_id_by_email", {"email": "bob.okafor@mail.test"})).plant("order")
    s.turn(Reply.tool("get_user_details", {"user_id": "ben_okafor_7310"}))
    lookup(s, "W201").ask("Cancel W201?", "Yes, go ahead.")
    out.append(s.turn(Reply(calls=(cancel("W201"),)), Reply.say("Cancelled.")))
    return out


PASSING = {s.said[0]: s for s in passing()}
FAILING = {s.said[0]: s for s in failing()}
PLANTED = {q: s.planted for q, s in FAILING.items()}


def question(s: Script) -> str:
    """The agent's argument for a conversation: the user's messages joined by `` || ``."""
    return " || ".join(s.said)


def route(req: ScriptedRequest) -> Reply:
    answers = sum(1 for m in req.messages if isinstance(m, dict) and m.get("role") == "assistant")
    first = req.user_texts()[0]
    return {**PASSING, **FAILING}[first].replies[answers]
