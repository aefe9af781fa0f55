from cassettes.providers._base import Provider


class AnthropicMessages(Provider):
    family = "anthropic"

    def recognise(self, method, url, body):  # placeholder until the adapter lands
        return 0
