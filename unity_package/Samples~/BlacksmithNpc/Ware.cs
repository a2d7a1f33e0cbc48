namespace CoreAI.Samples.BlacksmithNpc
{
    /// <summary>What Brom sells.</summary>
    public enum Ware
    {
        Sword,
        Axe,
        Horseshoe,
    }
}
